"""Finding the tables a SQL text reads, without Spark: what a SQL asset depends on."""

from __future__ import annotations

from lakehouse_assets.tables.sql_lineage import column_lineage
from lakehouse_assets.tables.sql_refs import referenced_tables

LAYERS = ["bronze", "silver", "gold"]


def test_tables_after_from_and_join_are_read_each_once() -> None:
    sql = ("SELECT r.mrn FROM bronze.recordings r JOIN bronze.patients AS p ON r.mrn = p.mrn "
           "JOIN bronze.recordings again USING (mrn)")
    assert referenced_tables(sql, LAYERS) == [("bronze.recordings", False), ("bronze.patients", False)]


def test_columns_strings_comments_longer_names_and_other_layers_are_not_tables() -> None:
    sql = ("SELECT r.mrn, 'FROM bronze.recordings' AS s -- FROM bronze.recordings\n"
           "/* FROM bronze.recordings */ FROM cat.bronze.recordings r JOIN other.thing o ON r.mrn = silver.mrn")
    assert referenced_tables(sql, LAYERS) == []


def test_back_quoted_names_and_stream_in_both_spellings() -> None:
    sql = ("SELECT * FROM STREAM(bronze.recordings) JOIN STREAM `bronze`.`patients` "
           "UNION SELECT * FROM gold.daily_patient_avg VERSION AS OF 3")
    assert referenced_tables(sql, LAYERS) == [
        ("bronze.recordings", True), ("bronze.patients", True), ("gold.daily_patient_avg", False)]


def test_column_lineage_reads_through_stream() -> None:
    sql = "SELECT r.mrn, r.heartrate * 2 AS doubled FROM STREAM(bronze.recordings) r WHERE r.heartrate > 0"
    assert column_lineage(sql, ["bronze.recordings"]) == {
        "mrn": [("bronze.recordings", "mrn")], "doubled": [("bronze.recordings", "heartrate")]}
