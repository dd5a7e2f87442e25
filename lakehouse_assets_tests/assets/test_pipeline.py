"""The reference pipeline materialized through Dagster, checked against a batch recomputation."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import land
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.tables.reading import stream_readers
from lakehouse_assets_tests.assets.pipeline import (
    SEED_WITHOUT_CHECKS,
    delta_rows,
    expected_outputs,
    materialization_metadata,
    materialize,
    observation_metadata,
    spark_rows,
)

SILVER_COLUMNS = ["device_id", "mrn", "name", "time", "heartrate"]
GOLD_AVG_COLUMNS = ["mrn", "name", "date", "avg_heartrate"]
DEVICE_COLUMNS = ["device_id", "total_recordings"]
SEED_KEYS = ("bronze/recordings", "silver/patients", "silver/recordings_enriched", "gold/daily_patient_avg",
             "gold/device_counts")
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
    result = materialize(SEED_WITHOUT_CHECKS, instance=instance)
    run, observed = materialization_metadata(result), observation_metadata(result)

    # Only the two new files were read, by every hop downstream of them.
    assert run["bronze/recordings"]["rows_processed"] == second.counts.total
    assert run["bronze/recordings"]["dagster/row_count"] == first.counts.total + second.counts.total
    silver_new = run["silver/recordings_enriched"]["rows_processed"]
    assert silver_new == second.counts.total
    assert_tables_match_batch_recomputation(spark, settings)
    # The patients lookup's CSV did not change: it is neither read again nor rewritten. The run
    # observes it, saying why; as silver reads it in this run, it is also reported as kept (a
    # materialization without a commit: Dagster skips a reader whose upstream yields nothing).
    patients = Path(settings.table_path("silver", "patients"))
    assert "landing/patients as it was" in observed["silver/patients"]["not_written"]
    assert run["silver/patients"]["not_written"] == observed["silver/patients"]["not_written"]
    assert observed["silver/patients"]["delta_version"] == DeltaTableStore().version(str(patients)) == 0

    # Nothing new: the landing folder and the upstream tables' versions (against what each
    # table's last commit read) say so, and no query is started at all; nothing is committed,
    # so no materialization is recorded, only observations.
    versions = {key: DeltaTableStore().version(str(settings.table_path(*key.split("/")))) for key in SEED_KEYS}
    result = materialize(SEED_WITHOUT_CHECKS, instance=instance)
    assert materialization_metadata(result) == {}
    observed = observation_metadata(result)
    # The tables at the top say why in an observation; Dagster skips the steps below them,
    # which have nothing new from them either.
    assert {"bronze/recordings", "silver/patients"} <= set(observed)
    skipped = {e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SKIPPED}
    for key in SEED_KEYS:
        if key in observed:
            assert observed[key]["not_written"] and observed[key]["delta_version"] == versions[key], key
        else:
            assert key.replace("/", "__") in skipped, key
    assert_tables_match_batch_recomputation(spark, settings)
    # Each table's commits recorded how far its run read, which VACUUM asks: the readers of
    # bronze and silver have read them to their latest versions, and no checkpointed query is
    # unaccounted for.
    store = DeltaTableStore()
    for table in ("bronze.recordings", "silver.recordings_enriched"):
        path = str(settings.table_path(*table.split(".")))
        readers = stream_readers(instance, settings, store, table, store.table_id(path))
        assert readers and {r.version for r in readers} == {store.version(path)}, (table, readers)
    assert all(r.version is not None for r in stream_readers(instance, settings, store, "silver.patients", None))

    # A lookup file landed again (here: touched) is read again; so is one whose run asks for
    # a full refresh.
    csv = Path(settings.landing_path("patients")) / "patients.csv"
    os.utime(csv, ns=(csv.stat().st_atime_ns, csv.stat().st_mtime_ns + 10**9))
    run = materialization_metadata(materialize(["silver/patients"], instance=instance))
    assert run["silver/patients"]["delta_version"] == 1
    refreshed = materialize(["silver/patients"], instance=instance,
                            run_config={"ops": {"silver__patients": {"config": {"full_refresh": True}}}})
    assert materialization_metadata(refreshed)["silver/patients"]["delta_version"] == 0  # a new table

