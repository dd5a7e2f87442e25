"""Declared column types are contracts, through Dagster with the real IO manager, real Spark
and real tables: a column a SQL column list or a Python asset's ``DescribedColumn`` declares a
type for is stored as that type when the query's own type fits it (a decimal expression
declared DOUBLE, an INT declared BIGINT), whatever the way the table is written; a type that
does not fit, or a declared column the query does not make, is refused naming the table, the
column and both types, with nothing written."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.assets.sql_asset import sql_asset
from lakehouse_assets.assets.table_asset import batch_from, table_asset
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.quality.contract import DescribedColumn
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata, materialize_alone

EVENTS = ["bronze", "dt_events"]
SCHEMA = "id BIGINT, visits INT, tag STRING, admitted TIMESTAMP, discharged TIMESTAMP"
ADMITTED = dt.datetime(2024, 1, 1, 8, 0)
# The user's column: seconds between two timestamps over 3600.0, a decimal(27,6) to Spark.
STAY_HOURS = "(unix_timestamp(discharged) - unix_timestamp(admitted)) / 3600.0"

APPENDED = f"""
CREATE OR REFRESH STREAMING TABLE silver.dt_stays (
  id BIGINT COMMENT 'The stay',
  length_of_stay_hours DOUBLE COMMENT 'Hours from admission to discharge',
  visits BIGINT COMMENT 'Visits of the patient so far',
  tag COMMENT 'Untyped: stored as the query makes it'
)
AS SELECT id, {STAY_HOURS} AS length_of_stay_hours, visits, tag FROM STREAM(bronze.dt_events)
"""
ROUTED = f"""
CREATE OR REFRESH STREAMING TABLE silver.dt_routed (
  CONSTRAINT stayed EXPECT (length_of_stay_hours > 0) ON VIOLATION DROP ROW,
  length_of_stay_hours DOUBLE COMMENT 'Hours from admission to discharge',
  visits BIGINT COMMENT 'Visits of the patient so far'
)
AS SELECT id, {STAY_HOURS} AS length_of_stay_hours, visits FROM STREAM(bronze.dt_events)
"""


def materialize(*assets: dg.AssetsDefinition, raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
    return materialize_alone(*assets, upstream=EVENTS, raise_on_error=raise_on_error)


def land(spark, store, settings, rows: list[tuple[Any, ...]]) -> None:
    store.write(spark.createDataFrame(rows, SCHEMA), str(settings.table_path(*EVENTS)), mode="append")


def stay(id_: int, hours: float, visits: int = 1, tag: str = "a") -> tuple[Any, ...]:
    return (id_, visits, tag, ADMITTED, ADMITTED + dt.timedelta(hours=hours))


def sql_file(tmp_path: Path, name: str, text: str) -> dg.AssetsDefinition:
    (tmp_path / f"{name}.sql").write_text(text)
    return sql_asset(tmp_path / f"{name}.sql")


def stored_types(store, settings, layer: str, name: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in store.schema(str(settings.table_path(layer, name))).fields}


def declared_types(asset: dg.AssetsDefinition) -> dict[str, str]:
    """The column types the asset's definition shows before any run."""
    schema = next(iter(asset.metadata_by_key.values()))["dagster/column_schema"]
    return {c.name: c.type for c in schema.columns}


def reported_types(metadata: dict[str, Any]) -> dict[str, str]:
    """The column types a materialization reports: the table's, as stored."""
    return {c.name: c.type for c in metadata["dagster/column_schema"].columns}


def failure_message(result: dg.ExecuteInProcessResult) -> str:
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failures, "the run did not fail"
    error = failures[0].step_failure_data.error
    return "\n".join(part.message for part in [error, *(error.cause and [error.cause] or [])])


@pytest.mark.parametrize("name, text", [("dt_stays", APPENDED), ("dt_routed", ROUTED)])
def test_a_sql_table_stores_a_decimal_expression_declared_double_and_an_int_declared_bigint(
        spark, store, settings, tmp_path: Path, name: str, text: str) -> None:
    land(spark, store, settings, [stay(1, 1.5), stay(2, 1 / 3, visits=2)])
    asset = sql_file(tmp_path, name, text)
    # Without the declaration the query makes a decimal and an int: what the table stored before.
    made = spark.read.format("delta").load(str(settings.table_path(*EVENTS))).selectExpr(
        f"{STAY_HOURS} AS length_of_stay_hours", "visits").schema
    assert [f.dataType.simpleString() for f in made.fields] == ["decimal(27,6)", "int"]

    first = materialization_metadata(materialize(asset))[f"silver/{name}"]
    land(spark, store, settings, [stay(3, 2.25, visits=3, tag="b")])
    second = materialization_metadata(materialize(asset))[f"silver/{name}"]

    stored = stored_types(store, settings, "silver", name)
    assert (stored["length_of_stay_hours"], stored["visits"]) == ("double", "bigint")
    assert delta_rows(settings, "silver", name, ["id", "length_of_stay_hours", "visits"]) == [
        (1, 1.5, 1), (2, 0.333333, 2), (3, 2.25, 3)]
    # What the definition declares is what each materialization reports the table holds.
    declared = {column: kind for column, kind in declared_types(asset).items() if kind != "unknown"}
    for reported in (first, second):
        assert {column: reported_types(reported)[column] for column in declared} == declared
    if name == "dt_stays":
        assert stored["tag"] == "string"  # declared without a type: as the query makes it


@pytest.mark.parametrize("expression, made", [("tag", "string"), ("id", "bigint"), ("id * 1.5D", "double")])
def test_a_declared_int_over_a_wider_column_is_refused_naming_the_table_the_column_and_both_types(
        spark, store, settings, tmp_path: Path, expression: str, made: str) -> None:
    land(spark, store, settings, [stay(1, 1.0)])
    asset = sql_file(tmp_path, "refused", f"""
        CREATE OR REFRESH MATERIALIZED VIEW gold.dt_refused (n INT COMMENT 'A small number')
        AS SELECT {expression} AS n FROM bronze.dt_events""")

    failed = materialize(asset, raise_on_error=False)

    message = failure_message(failed)
    assert "gold.dt_refused" in message and "'n'" in message, message
    assert "declares column 'n' int" in message and f"makes it {made}" in message, message
    assert "Cast it in the query" in message, message
    assert not store.exists(str(settings.table_path("gold", "dt_refused")))


def test_a_routed_table_refuses_a_type_before_its_query_writes_the_quarantine(
        spark, store, settings, tmp_path: Path) -> None:
    land(spark, store, settings, [stay(1, 1.0), stay(2, -1.0)])
    asset = sql_file(tmp_path, "routed", ROUTED.replace("visits BIGINT", "visits TINYINT"))

    message = failure_message(materialize(asset, raise_on_error=False))

    assert "silver.dt_routed" in message and "'visits' tinyint" in message and "makes it int" in message, message
    assert not store.exists(str(settings.table_path("silver", "dt_routed_quarantine")))
    assert not store.exists(str(settings.table_path("silver", "dt_routed")))


def test_a_declared_column_the_query_does_not_make_is_refused_by_name(spark, store, settings, tmp_path: Path) -> None:
    land(spark, store, settings, [stay(1, 1.0)])
    asset = sql_file(tmp_path, "missing", """
        CREATE OR REFRESH MATERIALIZED VIEW gold.dt_missing (
          id BIGINT COMMENT 'The stay',
          total_hours DOUBLE COMMENT 'Declared, never selected'
        ) AS SELECT id FROM bronze.dt_events""")

    message = failure_message(materialize(asset, raise_on_error=False))

    assert "gold.dt_missing declares columns ['total_hours']" in message and "does not make them" in message, message
    assert not store.exists(str(settings.table_path("gold", "dt_missing")))


def python_stays(declared_visits: str) -> dg.AssetsDefinition:
    @table_asset(layer="silver", name="dt_python", ins={"events": batch_from(EVENTS)},
                 write_mode="merge", merge_keys=["id"],
                 columns=[DescribedColumn("id", "The stay", "bigint"),
                          DescribedColumn("length_of_stay_hours", "Hours from admission to discharge", "double"),
                          DescribedColumn("visits", "Visits of the patient so far", declared_visits),
                          DescribedColumn("tag", "Untyped")])
    def dt_python(events: DataFrame) -> DataFrame:
        return events.select("id", F.expr(STAY_HOURS).alias("length_of_stay_hours"), "visits", "tag")

    return dt_python


def test_a_python_table_holds_to_its_typed_described_columns_as_a_sql_one_does(spark, store, settings) -> None:
    land(spark, store, settings, [stay(1, 1.5), stay(2, 0.5, visits=2)])
    asset = python_stays("BIGINT")

    reported = materialization_metadata(materialize(asset))["silver/dt_python"]
    land(spark, store, settings, [stay(3, 3.0, visits=7)])
    materialize(asset)  # merged into the table, by id

    stored = stored_types(store, settings, "silver", "dt_python")
    assert (stored["length_of_stay_hours"], stored["visits"], stored["tag"]) == ("double", "bigint", "string")
    assert delta_rows(settings, "silver", "dt_python", ["id", "length_of_stay_hours", "visits"]) == [
        (1, 1.5, 1), (2, 0.5, 2), (3, 3.0, 7)]
    declared = {column: kind for column, kind in declared_types(asset).items() if kind != "unknown"}
    assert declared == {"id": "bigint", "length_of_stay_hours": "double", "visits": "bigint"}
    assert {column: reported_types(reported)[column] for column in declared} == declared

    message = failure_message(materialize(python_stays("smallint"), raise_on_error=False))
    assert "silver.dt_python" in message and "'visits' smallint" in message and "makes it int" in message, message


def test_a_type_that_is_not_spark_sql_is_refused_when_the_definition_loads(tmp_path: Path) -> None:
    with pytest.raises(LakehouseError, match="silver.dt_python: column 'visits': 'bigint not null' is not a Spark SQL"):
        python_stays("bigint not null")
