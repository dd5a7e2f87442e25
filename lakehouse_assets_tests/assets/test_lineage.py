"""Each reference table's column lineage as its materialization reports it (derived from its
DataFrame's plan, or read from its SQL), against the lineage worked out by hand.

Each asset's body is given its inputs as the IO manager loads them (new rows as a stream,
a lookup in batch) over small upstream tables, and its lineage is derived and held to the
tables' columns as the IO manager does; nothing is materialized here (see test_metadata.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.assets import bronze, gold, silver
from lakehouse_assets.io.lineage import derived_lineage, kept_lineage
from lakehouse_assets.io.table_run import table_run_of
from lakehouse_assets.outputs import ExpectedRows
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import TableRunConfig, TableSpec
from lakehouse_assets.storage import DeltaTableStore, StreamOptions, TableLayout
from lakehouse_assets.storage.delta import CHANGE_DATA_FEED
from lakehouse_assets.tables.lakehouse_tables import LakehouseTables

METADATA = "_rescued_data STRING, _source_file STRING, _source_line BIGINT, _ingested_at TIMESTAMP"
UPSTREAM = {
    ("bronze", "recordings"): (f"device_id BIGINT, mrn BIGINT, time DOUBLE, heartrate DOUBLE, {METADATA}",
                               [(1, 10, 1.7e9, 80.0, None, "f.json", 1, None)]),
    ("bronze", "patient_changes"): (f"mrn BIGINT, name STRING, op STRING, seq BIGINT, {METADATA}",
                                    [(10, "Ann", "UPSERT", 1, None, "c.json", 1, None)]),
    ("silver", "patients"): ("mrn BIGINT, name STRING", [(10, "Ann")]),
    ("silver", "recordings_enriched"): ("device_id BIGINT, mrn BIGINT, name STRING, time TIMESTAMP, heartrate DOUBLE, "
                                        "_source_file STRING, _source_line BIGINT",
                                        [(1, 10, "Ann", None, 80.0, "f.json", 1)]),
    ("silver", "patients_current"): ("mrn BIGINT, name STRING", [(10, "Ann")]),
}


@pytest.fixture(scope="module")
def lakehouse(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LakehouseSettings]:
    """The reference assets' upstream tables, one row each."""
    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path_factory.mktemp("lineage"))})
    store = DeltaTableStore()
    for (layer, name), (schema, rows) in UPSTREAM.items():
        properties = {CHANGE_DATA_FEED: "true"} if name == "patients_current" else None
        store.write(spark.createDataFrame(rows, schema), str(settings.table_path(layer, name)), layout=TableLayout(properties or {}))
    yield settings


def reported(asset: dg.AssetsDefinition, returned: Any, settings: LakehouseSettings,
             key: dg.AssetKey | None = None) -> dict[str, list[tuple[str, str]]]:
    """The lineage the IO manager reports for what ``asset`` returned, held to the columns
    the asset declares (those of its table)."""
    key = key or asset.key
    spec = TableSpec.of(asset.metadata_by_key[key])
    assert spec is not None
    run = table_run_of(key, spec, TableRunConfig(), settings)
    if isinstance(returned, DataFrame):
        returned = ExpectedRows(returned, ())
    lineage = derived_lineage(returned, run) or {}
    return kept_lineage(lineage, spec.column_descriptions, DeltaTableStore(), settings.root)


def body(asset: dg.AssetsDefinition) -> Callable[..., Any]:
    """The function the asset was declared with."""
    return inspect.unwrap(asset.op.compute_fn.decorated_fn)  # type: ignore[union-attr]


def stream(spark: SparkSession, settings: LakehouseSettings, layer: str, name: str,
           options: StreamOptions | None = None) -> DataFrame:
    return DeltaTableStore().read_stream(spark, str(settings.table_path(layer, name)), options)


def batch(spark: SparkSession, settings: LakehouseSettings, layer: str, name: str) -> DataFrame:
    return DeltaTableStore().read(spark, str(settings.table_path(layer, name)))


def test_bronze_tables_read_files_not_tables_so_report_no_lineage(lakehouse: LakehouseSettings) -> None:
    # Bronze's rows come from landed files (the landing assets have no columns); so do the
    # patients lookup's and the snapshot history's. Their bodies return no DataFrame to derive from.
    for asset in (bronze.recordings, bronze.patient_changes, silver.patients_snapshot_history):
        assert derived_lineage(object(), table_run_of(asset.key, TableSpec.of(asset.metadata_by_key[asset.key]),
                                                      TableRunConfig(), lakehouse)) is None


def test_silver_patients_lookup_reads_landed_csv_so_reports_no_lineage(
        spark: SparkSession, lakehouse: LakehouseSettings, tmp_path: Path) -> None:
    landed = tmp_path / "patients.csv"
    landed.write_text("mrn,name\n10,Ann\n")
    rows = spark.read.option("header", True).schema("mrn BIGINT, name STRING").csv(str(landed))
    assert reported(silver.patients, rows, lakehouse) == {}


def test_recordings_enriched(spark: SparkSession, lakehouse: LakehouseSettings) -> None:
    routed = body(silver.recordings_enriched)(recordings=stream(spark, lakehouse, "bronze", "recordings"),
                                              patients=batch(spark, lakehouse, "silver", "patients"))
    recordings, patients = "bronze.recordings", "silver.patients"
    # By hand: the join keeps bronze's mrn (a left join: the lookup's may be null); the name
    # is the lookup's; time is parsed from bronze's Unix seconds.
    assert reported(silver.recordings_enriched, routed, lakehouse,
                    dg.AssetKey(["silver", "recordings_enriched"])) == {
        "device_id": [(recordings, "device_id")],
        "mrn": [(recordings, "mrn")],
        "name": [(patients, "name")],
        "time": [(recordings, "time")],
        "heartrate": [(recordings, "heartrate")],
        "_source_file": [(recordings, "_source_file")],
        "_source_line": [(recordings, "_source_line")],
    }


def test_patients_current(spark: SparkSession, lakehouse: LakehouseSettings) -> None:
    changes = stream(spark, lakehouse, "bronze", "patient_changes")
    # By hand: the change feed's mrn and name; op, seq and bronze's metadata are not kept.
    assert reported(silver.patients_current, body(silver.patients_current)(changes), lakehouse) == {
        "mrn": [("bronze.patient_changes", "mrn")],
        "name": [("bronze.patient_changes", "name")],
    }


def test_patients_history_from_sql(spark: SparkSession, lakehouse: LakehouseSettings) -> None:
    changes = stream(spark, lakehouse, "bronze", "patient_changes")
    source = "bronze.patient_changes"
    # By hand: as patients_current, and each version opens and closes at a change's seq.
    assert reported(silver.patients_history, body(silver.patients_history)(changes), lakehouse) == {
        "mrn": [(source, "mrn")],
        "name": [(source, "name")],
        "__START_AT": [(source, "seq")],
        "__END_AT": [(source, "seq")],
    }


def test_heartrate_5min(spark: SparkSession, lakehouse: LakehouseSettings) -> None:
    recordings = stream(spark, lakehouse, "silver", "recordings_enriched")
    source = "silver.recordings_enriched"
    # By hand: windows of the recordings' time, measures of their heart rates.
    assert reported(gold.heartrate_5min, body(gold.heartrate_5min)(recordings), lakehouse) == {
        "device_id": [(source, "device_id")],
        "window_start": [(source, "time")],
        "window_end": [(source, "time")],
        "recordings": [(source, "heartrate")],
        "min_heartrate": [(source, "heartrate")],
        "mean_heartrate": [(source, "heartrate")],
        "max_heartrate": [(source, "heartrate")],
    }


def test_patient_changes(spark: SparkSession, lakehouse: LakehouseSettings) -> None:
    feed = stream(spark, lakehouse, "silver", "patients_current", StreamOptions(read_change_feed=True))
    # By hand: mrn and name are the current table's; the change, its version and time come
    # from the feed's own columns, which the table does not have.
    assert reported(gold.patient_changes, body(gold.patient_changes)(feed), lakehouse) == {
        "mrn": [("silver.patients_current", "mrn")],
        "name": [("silver.patients_current", "name")],
    }


@pytest.mark.parametrize("asset, expected", [
    (gold.daily_patient_avg, {
        "mrn": [("silver.recordings_enriched", "mrn")],
        "name": [("silver.recordings_enriched", "name")],
        "avg_heartrate": [("silver.recordings_enriched", "heartrate")],
        "date": [("silver.recordings_enriched", "time")],
    }),
    (gold.device_counts, {
        "device_id": [("bronze.recordings", "device_id")],
        "total_recordings": [("bronze.recordings", "device_id")],
    }),
], ids=["daily_patient_avg", "device_counts"])
def test_sql_tables_read_from_sql_and_the_plan_agrees(
        spark: SparkSession, lakehouse: LakehouseSettings, asset: dg.AssetsDefinition,
        expected: dict[str, list[tuple[str, str]]]) -> None:
    # What is reported is read from the SQL (the body's DataFrame is a batch's source rows).
    query = _sql_query(asset)
    assert reported(asset, ExpectedRows(spark.range(1).toDF("unused"), ()), lakehouse) == expected
    # The table's own query, planned, gives the same.
    grouped = LakehouseTables(spark, lakehouse).sql(query)
    run = table_run_of(asset.key, None, TableRunConfig(), lakehouse)
    assert derived_lineage(ExpectedRows(grouped, ()), run) == expected


def _sql_query(asset: dg.AssetsDefinition) -> str:
    from lakehouse_assets.tables.sql_definition import parse_sql_definition

    path = str(asset.metadata_by_key[asset.key]["lakehouse/sql_file"].path)
    return parse_sql_definition(Path(path).read_text(), source=path).query
