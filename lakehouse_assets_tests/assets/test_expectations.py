"""Expectations in full, through Dagster with the real IO manager, real Spark and real tables:
warn keeps a row and counts it, drop quarantines it with the rule's name, fail stops the
update with nothing committed and an error naming the rule, the table and a failing row; every
materialization reports each rule's passed and failed rows. Python and SQL assets alike."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import DataFrame

from lakehouse_assets.assets.bronze import bronze_table
from lakehouse_assets.assets.sql_asset import sql_asset
from lakehouse_assets.assets.table_asset import stream_from, table_asset
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.ingestion import AutoLoaderOptions
from lakehouse_assets.quality.quarantine import QUARANTINE_REASON
from lakehouse_assets.quality.rules import Severity, greater_than, not_null, null_or_empty
from lakehouse_assets.spec import TableSpec
from lakehouse_assets.tables.sql_definition import SqlDefinitionError
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata, materialize_alone

SCHEMA = "id BIGINT, value BIGINT, tag STRING"
EVENTS = ["bronze", "ex_events"]

VALUE_POSITIVE = greater_than("value", 0, name="value_positive", severity=Severity.WARN)
ID_PRESENT = not_null("id", name="id_present", severity=Severity.FAIL)


@table_asset(layer="silver", name="ex_python", ins={"events": stream_from(EVENTS)},
             expectations=[VALUE_POSITIVE, ID_PRESENT])
def python_expected(events: DataFrame) -> DataFrame:
    """Events as they are, under a warn and a fail expectation."""
    return events.select("id", "value")


SQL_STREAMING = """
CREATE OR REFRESH STREAMING TABLE silver.ex_sql (
  CONSTRAINT value_positive EXPECT (value > 0) ON VIOLATION DROP ROW,
  CONSTRAINT id_present EXPECT (id IS NOT NULL) ON VIOLATION FAIL UPDATE,
  CONSTRAINT tag_known EXPECT (tag IN ('a', 'b'))
)
COMMENT 'Events with a positive value.'
AS SELECT id, value, tag FROM STREAM(bronze.ex_events)
"""


def materialize(*assets: dg.AssetsDefinition, raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
    return materialize_alone(*assets, upstream=EVENTS, raise_on_error=raise_on_error)


def land(spark, store, settings, rows) -> None:
    path = str(settings.table_path(*EVENTS))
    store.write(spark.createDataFrame(rows, SCHEMA), path, mode="append")


def failure_message(result: dg.ExecuteInProcessResult) -> str:
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failures, "the run did not fail"
    error = failures[0].step_failure_data.error
    return "\n".join(part.message for part in [error, *(error.cause and [error.cause] or [])])


def test_a_python_asset_warns_counts_and_fails_its_update_with_nothing_committed(spark, store, settings):
    land(spark, store, settings, [(1, 5, "a"), (2, -1, "a"), (3, 0, "b")])
    first = materialization_metadata(materialize(python_expected))["silver/ex_python"]

    # warn: every row kept, the two non-positive values counted.
    assert delta_rows(settings, "silver", "ex_python", ["id", "value"]) == [(1, 5), (2, -1), (3, 0)]
    assert (first["expectations/value_positive/passed"], first["expectations/value_positive/failed"]) == (1, 2)
    assert (first["expectations/id_present/passed"], first["expectations/id_present/failed"]) == (3, 0)
    assert first["expectations/rows_checked"] == 3
    assert "value_positive" in first["expectations"]

    table = Path(settings.table_path("silver", "ex_python"))
    version = store.snapshot(str(table)).version
    land(spark, store, settings, [(4, 7, "a"), (None, 9, "b")])

    failed = materialize(python_expected, raise_on_error=False)

    assert not failed.success
    message = failure_message(failed)
    assert "id_present" in message and "silver.ex_python" in message and '"value": 9' in message, message
    assert "Nothing was committed" in message
    # fail: not even the good row of the batch is in the table, and the batch is not done.
    assert store.snapshot(str(table)).version == version
    assert delta_rows(settings, "silver", "ex_python", ["id"]) == [(1,), (2,), (3,)]
    # The batch is not done: the next run reads the same rows again, and fails on the same one.
    again = materialize(python_expected, raise_on_error=False)
    assert not again.success and '"value": 9' in failure_message(again)
    assert store.snapshot(str(table)).version == version


def test_a_sql_table_drops_to_its_quarantine_warns_and_fails_by_its_constraints(spark, store, settings, tmp_path: Path):
    (tmp_path / "ex_sql.sql").write_text(SQL_STREAMING)
    asset = sql_asset(tmp_path / "ex_sql.sql")
    assert set(asset.keys) == {dg.AssetKey(["silver", "ex_sql"]), dg.AssetKey(["silver", "ex_sql_quarantine"])}
    land(spark, store, settings, [(1, 5, "a"), (2, -1, "a"), (3, 4, "c"), (4, 0, "c")])

    metadata = materialization_metadata(materialize(asset))["silver/ex_sql"]

    assert delta_rows(settings, "silver", "ex_sql", ["id", "tag"]) == [(1, "a"), (3, "c")]
    assert delta_rows(settings, "silver", "ex_sql_quarantine", ["id", QUARANTINE_REASON]) == [
        (2, "value_positive"), (4, "value_positive")]
    counts = {rule: (metadata[f"expectations/{rule}/passed"], metadata[f"expectations/{rule}/failed"])
              for rule in ("value_positive", "id_present", "tag_known")}
    assert counts == {"value_positive": (2, 2), "id_present": (4, 0), "tag_known": (2, 2)}
    declared = TableSpec.of(asset.specs_by_key[dg.AssetKey(["silver", "ex_sql"])].metadata)
    assert declared is not None
    assert [(e.name, e.on_violation) for e in declared.expectations] == [
        ("value_positive", "drop row"), ("id_present", "fail update"), ("tag_known", "warn")]

    land(spark, store, settings, [(5, 1, "a"), (None, 2, "b")])
    failed = materialize(asset, raise_on_error=False)

    assert not failed.success
    assert "id_present" in failure_message(failed) and "silver.ex_sql" in failure_message(failed)
    assert delta_rows(settings, "silver", "ex_sql", ["id"]) == [(1,), (3,)]
    assert len(delta_rows(settings, "silver", "ex_sql_quarantine", ["id"])) == 2


def test_a_materialized_view_fails_its_update_on_a_fail_expectation(spark, store, settings, tmp_path: Path):
    (tmp_path / "ex_total.sql").write_text(
        "CREATE OR REFRESH MATERIALIZED VIEW gold.ex_total "
        "(CONSTRAINT total_small EXPECT (total < 100) ON VIOLATION FAIL UPDATE) "
        "AS SELECT count(*) AS events, sum(value) AS total FROM bronze.ex_events")
    asset = sql_asset(tmp_path / "ex_total.sql")
    land(spark, store, settings, [(1, 5, "a"), (2, 6, "a")])
    assert materialization_metadata(materialize(asset))["gold/ex_total"]["expectations/total_small/failed"] == 0
    land(spark, store, settings, [(3, 500, "a")])

    failed = materialize(asset, raise_on_error=False)

    assert not failed.success and "total_small" in failure_message(failed)
    assert delta_rows(settings, "gold", "ex_total", ["events", "total"]) == [(2, 11)]


STRICT_BRONZE = bronze_table(
    name="ex_strict", data_source="ex_strict", source_format="json",
    options=AutoLoaderOptions(format="json", schema_hints="id BIGINT, value BIGINT"),
    expectations=[greater_than("value", 0, name="value_positive", severity=Severity.WARN),
                  null_or_empty("_rescued_data", name="nothing_rescued", severity=Severity.FAIL)],
)


def test_a_bronze_table_enforces_its_expectations_on_what_it_ingests(spark, store, settings):
    landing = Path(settings.landing_path("ex_strict"))
    landing.mkdir(parents=True)
    (landing / "1.json").write_text('{"id": 1, "value": 10}\n{"id": 2, "value": -3}\n')

    first = materialization_metadata(materialize(STRICT_BRONZE))["bronze/ex_strict"]

    assert delta_rows(settings, "bronze", "ex_strict", ["id"]) == [(1,), (2,)]
    assert (first["expectations/value_positive/failed"], first["expectations/nothing_rescued/failed"]) == (1, 0)

    (landing / "2.json").write_text('{"id": 3, "value": 5}\n{"id": 4, "value": "not a number"}\n')
    failed = materialize(STRICT_BRONZE, raise_on_error=False)

    assert not failed.success
    message = failure_message(failed)
    assert "nothing_rescued" in message and "bronze.ex_strict" in message and "not a number" in message, message
    assert delta_rows(settings, "bronze", "ex_strict", ["id"]) == [(1,), (2,)]


def test_a_table_rewritten_whole_cannot_drop_rows(tmp_path: Path):
    (tmp_path / "ex_view.sql").write_text(
        "CREATE OR REFRESH MATERIALIZED VIEW gold.ex_view "
        "(CONSTRAINT total_small EXPECT (total < 100) ON VIOLATION DROP ROW) "
        "AS SELECT sum(value) AS total FROM bronze.ex_events")
    with pytest.raises(SqlDefinitionError, match="total_small.*cannot DROP ROW"):
        sql_asset(tmp_path / "ex_view.sql")
    dropping = table_asset(layer="silver", name="ex_dropping", expectations=[VALUE_POSITIVE.with_severity(Severity.ERROR)])
    with pytest.raises(LakehouseError, match="value_positive.*quarantine"):
        dropping(lambda events: events)
