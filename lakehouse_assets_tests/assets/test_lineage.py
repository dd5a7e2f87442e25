"""Each reference table's column lineage as its materialization reports it (declared by a
Python table, read from its SQL by sqlglot for a SQL one), against the lineage worked out by
hand, held to the tables' columns as the IO manager does over small upstream tables; nothing is
materialized here (see test_column_metadata.py)."""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.assets import bronze, gold, silver
from lakehouse_assets.io.lineage import declared_lineage, kept_lineage
from lakehouse_assets.io.table_run import table_run_of
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import TableRunConfig, TableSpec
from lakehouse_assets.storage import DeltaTableStore, TableLayout
from lakehouse_assets.storage.delta import CHANGE_DATA_FEED

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


def reported(asset: dg.AssetsDefinition, settings: LakehouseSettings,
             key: dg.AssetKey | None = None) -> dict[str, list[tuple[str, str]]]:
    """The lineage the IO manager reports for ``asset``'s table: the declared one, held to
    the columns the asset declares (those of its table) and to its upstream tables' columns."""
    key = key or asset.key
    spec = TableSpec.of(asset.metadata_by_key[key])
    assert spec is not None
    run = table_run_of(key, spec, TableRunConfig(), settings)
    lineage = declared_lineage(run) or {}
    return kept_lineage(lineage, spec.column_descriptions, DeltaTableStore(), settings.root)


def test_tables_read_from_files_report_no_lineage(lakehouse: LakehouseSettings) -> None:
    # Bronze's rows come from landed files (the landing assets have no columns); so do the
    # patients lookup's and the snapshot history's: no table column to name.
    for asset in (bronze.recordings, bronze.patient_changes, silver.patients, silver.patients_snapshot_history):
        assert reported(asset, lakehouse) == {}, asset.key


def test_recordings_enriched(lakehouse: LakehouseSettings) -> None:
    recordings, patients = "bronze.recordings", "silver.patients"
    # By hand: the join keeps bronze's mrn (a left join: the lookup's may be null); the name
    # is the lookup's; time is parsed from bronze's Unix seconds.
    assert reported(silver.recordings_enriched, lakehouse,
                    dg.AssetKey(["silver", "recordings_enriched"])) == {
        "device_id": [(recordings, "device_id")],
        "mrn": [(recordings, "mrn")],
        "name": [(patients, "name")],
        "time": [(recordings, "time")],
        "heartrate": [(recordings, "heartrate")],
        "_source_file": [(recordings, "_source_file")],
        "_source_line": [(recordings, "_source_line")],
    }


def test_patients_current(lakehouse: LakehouseSettings) -> None:
    # By hand: the change feed's mrn and name; op, seq and bronze's metadata are not kept.
    assert reported(silver.patients_current, lakehouse) == {
        "mrn": [("bronze.patient_changes", "mrn")],
        "name": [("bronze.patient_changes", "name")],
    }


def test_patients_history_from_sql(lakehouse: LakehouseSettings) -> None:
    source = "bronze.patient_changes"
    # By hand: as patients_current, and each version opens and closes at a change's seq.
    assert reported(silver.patients_history, lakehouse) == {
        "mrn": [(source, "mrn")],
        "name": [(source, "name")],
        "__START_AT": [(source, "seq")],
        "__END_AT": [(source, "seq")],
    }


def test_heartrate_5min(lakehouse: LakehouseSettings) -> None:
    source = "silver.recordings_enriched"
    # By hand: windows of the recordings' time, measures of their heart rates.
    assert reported(gold.heartrate_5min, lakehouse) == {
        "device_id": [(source, "device_id")],
        "window_start": [(source, "time")],
        "window_end": [(source, "time")],
        "recordings": [(source, "heartrate")],
        "min_heartrate": [(source, "heartrate")],
        "mean_heartrate": [(source, "heartrate")],
        "max_heartrate": [(source, "heartrate")],
    }


def test_patient_changes(lakehouse: LakehouseSettings) -> None:
    # By hand: mrn and name are the current table's; the change, its version and time come
    # from the feed's own columns, which the table does not have.
    assert reported(gold.patient_changes, lakehouse) == {
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
def test_sql_tables_report_the_lineage_their_sql_gives(
        lakehouse: LakehouseSettings, asset: dg.AssetsDefinition, expected: dict[str, list[tuple[str, str]]]) -> None:
    assert reported(asset, lakehouse) == expected


def test_a_declared_column_the_upstream_table_lacks_is_not_reported(
        spark: SparkSession, lakehouse: LakehouseSettings) -> None:
    # patient_changes reads a change data feed: had it declared its `change` from the feed's
    # `_change_type`, that column is no table's and is held back.
    lineage = {"mrn": [("silver.patients_current", "mrn")], "change": [("silver.patients_current", "_change_type")]}
    assert kept_lineage(lineage, ["mrn", "change"], DeltaTableStore(), lakehouse.root) == {
        "mrn": [("silver.patients_current", "mrn")]}
