"""Finding lakehouse table names in SQL text, without Spark."""

from __future__ import annotations

from lakehouse_assets.tables.sql_refs import find_table_refs, rewrite, unknown_tables

KNOWN = ["bronze.recordings", "silver.recordings_enriched", "gold.daily_patient_avg", "bronze.patients"]


def rewritten(sql: str) -> str:
    refs = find_table_refs(sql, KNOWN)
    return rewrite(sql, refs, [f"v_{r.table.replace('.', '_')}" for r in refs])


def test_a_table_in_from_is_replaced_and_keeps_its_name_as_alias() -> None:
    assert rewritten("SELECT recordings.mrn FROM bronze.recordings WHERE heartrate > 0") == (
        "SELECT recordings.mrn FROM `v_bronze_recordings` AS `recordings` WHERE heartrate > 0")


def test_an_alias_the_query_gives_is_kept() -> None:
    assert rewritten("SELECT r.mrn FROM bronze.recordings r JOIN bronze.patients AS p ON r.mrn = p.mrn") == (
        "SELECT r.mrn FROM `v_bronze_recordings` r JOIN `v_bronze_patients` AS p ON r.mrn = p.mrn")


def test_columns_strings_comments_and_longer_names_are_left_alone() -> None:
    sql = ("SELECT r.mrn, 'bronze.recordings' AS s -- bronze.recordings\n"
           "/* FROM bronze.recordings */ FROM cat.bronze.recordings r, bronze.recordings.x")
    assert find_table_refs(sql, KNOWN) == []


def test_back_quoted_and_differently_cased_names_are_found() -> None:
    refs = find_table_refs("SELECT * FROM `silver`.`recordings_enriched` JOIN Gold.Daily_Patient_Avg g", KNOWN)
    assert [(r.table, r.aliased) for r in refs] == [("silver.recordings_enriched", False), ("gold.daily_patient_avg", True)]


def test_stream_in_both_spellings_and_time_travel() -> None:
    sql = ("SELECT * FROM STREAM(bronze.recordings) JOIN STREAM bronze.patients "
           "UNION SELECT * FROM gold.daily_patient_avg VERSION AS OF 3 "
           "UNION SELECT * FROM silver.recordings_enriched TIMESTAMP AS OF '2026-11-25 10:00:00' e")
    refs = find_table_refs(sql, KNOWN)
    assert [(r.table, r.stream, r.version, r.timestamp, r.aliased) for r in refs] == [
        ("bronze.recordings", True, None, None, False),
        ("bronze.patients", True, None, None, False),
        ("gold.daily_patient_avg", False, 3, None, False),
        ("silver.recordings_enriched", False, None, "2026-11-25 10:00:00", True),
    ]
    assert rewritten(sql) == (
        "SELECT * FROM `v_bronze_recordings` AS `recordings` JOIN `v_bronze_patients` AS `patients` "
        "UNION SELECT * FROM `v_gold_daily_patient_avg` AS `daily_patient_avg` "
        "UNION SELECT * FROM `v_silver_recordings_enriched` e")


def test_unknown_tables_in_a_known_layer_are_named_but_not_columns_or_other_names() -> None:
    sql = ("SELECT r.mrn FROM bronze.recordngs r JOIN silver.nope ON r.mrn = silver.mrn "
           "JOIN other.thing USING (mrn) JOIN bronze.recordings")
    assert unknown_tables(sql, KNOWN) == ["bronze.recordngs", "silver.nope"]
