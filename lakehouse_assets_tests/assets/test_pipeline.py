"""The reference pipeline materialized through Dagster, checked against a batch recomputation."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import land
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.tables.upstream_versions import recorded_readers
from lakehouse_assets_tests.assets.pipeline import (
    SEED_WITHOUT_CHECKS,
    delta_rows,
    expected_outputs,
    materialization_metadata,
    materialize,
    spark_rows,
)

SILVER_COLUMNS = ["device_id", "mrn", "name", "time", "heartrate"]
GOLD_AVG_COLUMNS = ["mrn", "name", "date", "avg_heartrate"]
DEVICE_COLUMNS = ["device_id", "total_recordings"]
LANDING_OPTIONS = dict(records_per_file=400, bad_rate=0.0, seed=11, files_per_year=365)


def assert_tables_match_batch_recomputation(spark, settings: LakehouseSettings) -> None:
    expected = expected_outputs(spark, Path(settings.root) / "landing")
    assert delta_rows(settings, "bronze", "recordings", ["device_id", "mrn", "time", "heartrate"]) == spark_rows(
        expected["recordings"], ["device_id", "mrn", "time", "heartrate"]
    )
    assert delta_rows(settings, "silver", "recordings_enriched", SILVER_COLUMNS) == spark_rows(
        expected["recordings_enriched"], SILVER_COLUMNS
    )
    assert delta_rows(settings, "gold", "daily_patient_avg", GOLD_AVG_COLUMNS) == spark_rows(
        expected["daily_patient_avg"], GOLD_AVG_COLUMNS
    )
    assert delta_rows(settings, "gold", "device_counts", DEVICE_COLUMNS) == spark_rows(
        expected["device_counts"], DEVICE_COLUMNS
    )


@pytest.mark.slow
def test_whole_graph_then_an_increment_processes_only_the_new_files(spark, settings):
    first = land(settings.root / "landing", files=3, **LANDING_OPTIONS)
    instance = dg.DagsterInstance.ephemeral()  # one record of the runs, as a deployment keeps

    run = materialization_metadata(materialize(SEED_WITHOUT_CHECKS, instance=instance))

    assert set(run) == {
        "bronze/recordings", "silver/patients", "silver/recordings_enriched", "silver/recordings_quarantine",
        "gold/daily_patient_avg", "gold/device_counts",
    }
    assert run["bronze/recordings"]["rows_processed"] == first.counts.total
    assert run["bronze/recordings"]["dagster/row_count"] == first.counts.total
    assert_tables_match_batch_recomputation(spark, settings)

    second = land(settings.root / "landing", files=2, **LANDING_OPTIONS)
    run = materialization_metadata(materialize(SEED_WITHOUT_CHECKS, instance=instance))

    # Only the two new files were read, by every hop downstream of them.
    assert run["bronze/recordings"]["rows_processed"] == second.counts.total
    assert run["gold/device_counts"]["rows_processed"] == second.counts.total
    assert run["bronze/recordings"]["dagster/row_count"] == first.counts.total + second.counts.total
    silver_new = run["silver/recordings_enriched"]["rows_processed"]
    assert silver_new == second.counts.total
    assert_tables_match_batch_recomputation(spark, settings)
    # The patients lookup's CSV did not change: it is neither read again nor rewritten.
    patients = Path(settings.table_path("silver", "patients"))
    assert "landing/patients holds the files its last run read" in run["silver/patients"]["not_written"]
    assert run["silver/patients"]["delta_version"] == DeltaTableStore().version(str(patients)) == 0

    # Nothing new: the landing folder and the upstream tables' versions (against what each
    # table's last materialization read to) say so, and no query is started at all; the
    # materializations say so, with no counts to plot as if the tables had changed.
    run = materialization_metadata(materialize(SEED_WITHOUT_CHECKS, instance=instance))
    for key in ("bronze/recordings", "silver/recordings_enriched", "gold/daily_patient_avg", "gold/device_counts"):
        assert run[key]["written_version"] == "none (nothing new)", key
        assert "rows_processed" not in run[key] and "micro_batches" not in run[key], key
        assert run[key]["query_id"] == "", key
    assert run["silver/patients"]["delta_version"] == 0 and "not_written" in run["silver/patients"]
    assert_tables_match_batch_recomputation(spark, settings)
    # Each query's materializations recorded how far it read, which VACUUM asks: the readers
    # of bronze and silver have read them to their latest versions, and no checkpointed query
    # is unaccounted for.
    store = DeltaTableStore()
    for table in ("bronze.recordings", "silver.recordings_enriched"):
        path = str(settings.table_path(*table.split(".")))
        readers = recorded_readers(instance, settings, table, store.table_id(path))
        assert readers and {r.version for r in readers} == {store.version(path)}, (table, readers)
    assert all(r.version is not None for r in recorded_readers(instance, settings, "silver.patients", None))

    # A lookup file landed again (here: touched) is read again; so is one whose run asks for
    # a full refresh.
    csv = Path(settings.landing_path("patients")) / "patients.csv"
    os.utime(csv, ns=(csv.stat().st_atime_ns, csv.stat().st_mtime_ns + 10**9))
    run = materialization_metadata(materialize(["silver/patients"], instance=instance))
    assert "not_written" not in run["silver/patients"] and run["silver/patients"]["delta_version"] == 1
    refreshed = materialize(["silver/patients"], instance=instance,
                            run_config={"ops": {"silver__patients": {"config": {"full_refresh": True}}}})
    assert "not_written" not in materialization_metadata(refreshed)["silver/patients"]

