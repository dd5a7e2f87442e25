"""SQL table definitions (Lakeflow's CREATE OR REFRESH ...) and the column lineage read from
their queries, without Spark; the reference gold tables' lineage against the one worked out by hand."""

from __future__ import annotations

import pytest

from lakehouse_assets.assets.sql_asset import SQL_FOLDER
from lakehouse_assets.tables.sql_definition import (
    OnViolation,
    SqlDefinitionError,
    SqlTableKind,
    parse_sql_definition,
)
from lakehouse_assets.tables.sql_lineage import column_lineage


def test_a_streaming_table_with_a_comment_reads_its_streams_and_groups_in_complete_mode() -> None:
    definition = parse_sql_definition(
        "-- a comment\ncreate or refresh streaming table gold.by_name\nCOMMENT 'Per name, it\\'s all'\n"
        "AS SELECT p.name, count(*) AS n FROM STREAM(silver.x) r JOIN silver.patients p ON r.mrn = p.mrn "
        "GROUP BY p.name;", source="by_name.sql")
    assert (definition.kind, definition.table, definition.comment) == (
        SqlTableKind.streaming_table, "gold.by_name", "Per name, it's all")
    assert definition.reads == (("silver.x", True), ("silver.patients", False))
    assert definition.query.startswith("SELECT p.name") and not definition.query.endswith(";")
    assert definition.complete


def test_table_properties_are_read_before_or_after_the_comment() -> None:
    definition = parse_sql_definition(
        "CREATE OR REFRESH STREAMING TABLE silver.t TBLPROPERTIES (delta.enableChangeDataFeed = true, "
        "'delta.appendOnly' = 'false', `my`.`key` = 3) COMMENT 'kept' AS SELECT * FROM STREAM(bronze.x)",
        source="t.sql")
    assert definition.comment == "kept"
    assert dict(definition.properties) == {
        "delta.enableChangeDataFeed": "true", "delta.appendOnly": "false", "my.key": "3"}
    assert definition.query == "SELECT * FROM STREAM(bronze.x)"


def test_partition_and_clustering_columns_are_read_among_the_clauses() -> None:
    partitioned = parse_sql_definition(
        "CREATE OR REFRESH STREAMING TABLE silver.t PARTITIONED BY (day, `region`) COMMENT 'kept' "
        "AS SELECT * FROM STREAM(bronze.x)", source="t.sql")
    assert (partitioned.partitioned_by, partitioned.clustered_by, partitioned.comment) == (("day", "region"), (), "kept")
    clustered = parse_sql_definition(
        "CREATE OR REFRESH MATERIALIZED VIEW gold.t TBLPROPERTIES (delta.appendOnly = false) CLUSTER BY (mrn) "
        "AS SELECT * FROM silver.x", source="t.sql")
    assert (clustered.partitioned_by, clustered.clustered_by) == ((), ("mrn",))
    with pytest.raises(SqlDefinitionError, match=r"t\.sql: silver\.t: PARTITIONED BY is given twice"):
        parse_sql_definition("CREATE OR REFRESH STREAMING TABLE silver.t PARTITIONED BY (a) PARTITIONED BY (b) "
                             "AS SELECT * FROM STREAM(bronze.x)", source="t.sql")


def test_a_streaming_table_that_only_groups_in_a_subquery_appends() -> None:
    definition = parse_sql_definition(
        "CREATE OR REFRESH STREAMING TABLE silver.y AS SELECT * FROM STREAM(bronze.r) "
        "WHERE mrn IN (SELECT mrn FROM silver.patients GROUP BY mrn)", source="y.sql")
    assert not definition.complete


def test_a_materialized_view_reads_tables_as_they_stand() -> None:
    definition = parse_sql_definition(
        "CREATE OR REFRESH MATERIALIZED VIEW gold.v AS SELECT count(*) AS n FROM silver.x", source="v.sql")
    assert (definition.kind, definition.reads, definition.complete) == (
        SqlTableKind.materialized_view, (("silver.x", False),), False)


def test_constraints_are_read_with_their_conditions_columns_and_actions() -> None:
    definition = parse_sql_definition(
        "CREATE OR REFRESH STREAMING TABLE silver.t (\n"
        "  CONSTRAINT valid_hr EXPECT (heartrate > 0 AND heartrate <= 300) ON VIOLATION DROP ROW,\n"
        "  CONSTRAINT named EXPECT (length(trim(name)) > 0 OR mrn IN (1, 2)) ON VIOLATION FAIL UPDATE,\n"
        "  constraint counted expect (device_id is not null)\n"
        ") COMMENT 'checked' AS SELECT * FROM STREAM(bronze.r)", source="t.sql")
    assert [(c.name, c.condition, c.columns, c.on_violation) for c in definition.constraints] == [
        ("valid_hr", "heartrate > 0 AND heartrate <= 300", ("heartrate",), OnViolation.drop_row),
        ("named", "length(trim(name)) > 0 OR mrn IN (1, 2)", ("mrn", "name"), OnViolation.fail_update),
        ("counted", "device_id is not null", ("device_id",), OnViolation.warn),
    ]
    assert definition.comment == "checked" and definition.reads == (("bronze.r", True),)


def test_columns_are_described_beside_the_constraints_with_or_without_a_type() -> None:
    definition = parse_sql_definition(
        "CREATE OR REFRESH STREAMING TABLE gold.t (\n"
        "  mrn BIGINT COMMENT 'The patient\\'s number',\n"
        "  CONSTRAINT known EXPECT (mrn IS NOT NULL),\n"
        "  total DECIMAL(10, 2) COMMENT 'What they paid',\n"
        "  `odd name` COMMENT 'Untyped'\n"
        ") COMMENT 'described' AS SELECT mrn, total, 1 AS `odd name` FROM STREAM(silver.x)", source="t.sql")
    assert [(c.name, c.type, c.comment) for c in definition.columns] == [
        ("mrn", "bigint", "The patient's number"), ("total", "decimal(10, 2)", "What they paid"),
        ("odd name", "", "Untyped")]
    assert [c.name for c in definition.constraints] == ["known"] and definition.comment == "described"


@pytest.mark.parametrize("text, says", [
    ("SELECT 1", "does not start with CREATE OR REFRESH"),
    ("CREATE OR REFRESH TABLE gold.t AS SELECT 1", "STREAMING TABLE or MATERIALIZED VIEW"),
    ("CREATE OR REFRESH MATERIALIZED VIEW t AS SELECT 1", "named layer.name"),
    ("CREATE OR REFRESH STREAMING TABLE gold.t (n BIGINT) AS SELECT * FROM STREAM(silver.x)",
     "column descriptions (name [type] COMMENT '...')"),
    ("CREATE OR REFRESH STREAMING TABLE gold.t (n COMMENT 'a', N COMMENT 'b') AS SELECT * FROM STREAM(silver.x)",
     "names a column twice"),
    ("CREATE OR REFRESH STREAMING TABLE gold.t (CONSTRAINT ok EXPECT (n > 0) ON VIOLATION IGNORE) "
     "AS SELECT * FROM STREAM(silver.x)", "ON VIOLATION DROP ROW, ON VIOLATION FAIL UPDATE, or nothing"),
    ("CREATE OR REFRESH STREAMING TABLE gold.t (CONSTRAINT ok EXPECT (n > 0), CONSTRAINT ok EXPECT (n < 9)) "
     "AS SELECT * FROM STREAM(silver.x)", "names a CONSTRAINT twice"),
    ("CREATE OR REFRESH STREAMING TABLE gold.t (CONSTRAINT ok EXPECT (1 = 1)) AS SELECT * FROM STREAM(silver.x)",
     "reads no column"),
    ("CREATE OR REFRESH STREAMING TABLE gold.t (CONSTRAINT ok EXPECT (n > 0) AS SELECT * FROM STREAM(silver.x)",
     "never closed"),
    ("CREATE OR REFRESH STREAMING TABLE gold.t AS SELECT * FROM silver.x", "reads no table with STREAM"),
    ("CREATE OR REFRESH MATERIALIZED VIEW gold.t AS SELECT * FROM STREAM(silver.x)", "as a stream"),
    ("CREATE OR REFRESH MATERIALIZED VIEW gold.t COMMENT nope AS SELECT 1", "quoted string"),
    ("CREATE OR REFRESH MATERIALIZED VIEW gold.t TBLPROPERTIES delta.x = 1 AS SELECT 1", "(key = value, ...)"),
    ("CREATE OR REFRESH MATERIALIZED VIEW gold.t TBLPROPERTIES (delta.x) AS SELECT 1", "key = value pairs"),
    ("CREATE OR REFRESH MATERIALIZED VIEW gold.t TBLPROPERTIES (a = 1, 'a' = 2) AS SELECT 1", "sets a twice"),
    ("CREATE OR REFRESH MATERIALIZED VIEW gold.t (n DUBBLE COMMENT 'a') AS SELECT 1 AS n",
     "gold.t: column n: 'dubble' is not a Spark SQL type"),
    ("CREATE OR REFRESH MATERIALIZED VIEW gold.t (n BIGINT NOT NULL COMMENT 'a') AS SELECT 1 AS n",
     "gold.t: column n: 'bigint not null' is not a Spark SQL type"),
])
def test_a_definition_that_cannot_be_a_table_is_refused_naming_the_file(text: str, says: str) -> None:
    with pytest.raises(SqlDefinitionError, match="bad.sql") as refused:
        parse_sql_definition(text, source="bad.sql")
    assert says in str(refused.value)


def test_the_reference_gold_lineage_read_from_sql_is_the_one_worked_out_by_hand() -> None:
    daily = parse_sql_definition((SQL_FOLDER / "daily_patient_avg.sql").read_text(), "daily_patient_avg.sql")
    counts = parse_sql_definition((SQL_FOLDER / "device_counts.sql").read_text(), "device_counts.sql")

    assert column_lineage(daily.query, ["silver.recordings_enriched"]) == {
        "mrn": [("silver.recordings_enriched", "mrn")],
        "name": [("silver.recordings_enriched", "name")],
        "avg_heartrate": [("silver.recordings_enriched", "heartrate")],
        "date": [("silver.recordings_enriched", "time")],
    }
    assert column_lineage(counts.query, ["bronze.recordings"]) == {
        "device_id": [("bronze.recordings", "device_id")],
        "total_recordings": [("bronze.recordings", "device_id")],
    }


def test_lineage_follows_aliases_across_a_join_and_leaves_out_what_it_cannot_tell() -> None:
    lineage = column_lineage(
        "SELECT r.mrn, p.name AS patient, r.heartrate * 2 AS doubled, heartrate FROM bronze.r r "
        "JOIN silver.patients p ON r.mrn = p.mrn", ["bronze.r", "silver.patients"])
    assert lineage == {"mrn": [("bronze.r", "mrn")], "patient": [("silver.patients", "name")],
                       "doubled": [("bronze.r", "heartrate")]}
