"""Materialize all, from any state of the lakehouse: a table whose source has not landed is
skipped with its reason, never a failed run, and nothing is written in its place.

The states: (a) an empty lakehouse, (b) only the seeds' data landed (recordings and the
patients CSV), (c) only patient changes landed, (d) landing folders deleted after their tables
were built; and a table materialized alone, over an upstream never built (skipped) and over
an upstream that moved on (it catches up).
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from lakehouse_assets.quality.freshness import FRESHNESS_CHECK
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import land
from lakehouse_assets.simulator.patient_changes import land_patient_changes
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata, materialize

LANDING_OPTIONS = dict(records_per_file=200, bad_rate=0.0, files_per_year=365)
SEED_TABLES = {"bronze/recordings", "silver/patients", "silver/recordings_enriched", "silver/recordings_quarantine",
               "gold/daily_patient_avg", "gold/device_counts", "gold/heartrate_5min"}
CHANGE_TABLES = {"bronze/patient_changes", "silver/patients_current", "silver/patients_history",
                 "gold/patient_changes"}


def materialized(result: dg.ExecuteInProcessResult) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events() if e.asset_key}


def checked(result: dg.ExecuteInProcessResult) -> set[str]:
    """The assets some check evaluated in the run."""
    return {e.asset_key.to_user_string() for e in result.get_asset_check_evaluations()}


def skipped_steps(result: dg.ExecuteInProcessResult) -> set[str]:
    return {e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SKIPPED and e.step_key}


def run_log(instance: dg.DagsterInstance, result: dg.ExecuteInProcessResult) -> str:
    """Every message of the run's log, as the UI lists it."""
    return "\n".join(entry.user_message for entry in instance.all_logs(result.run_id))


def tables_on_disk(settings: LakehouseSettings) -> set[str]:
    return {f"{layer.name}/{table.name}" for layer in Path(settings.root).iterdir() if layer.is_dir()
            for table in layer.iterdir() if (table / "_delta_log").is_dir()}


def version(settings: LakehouseSettings, key: str) -> int:
    return DeltaTable(str(settings.table_path(*key.split("/")))).version()


@pytest.mark.slow
def test_an_empty_lakehouse_materializes_green_with_every_table_skipped(spark, settings):
    instance = dg.DagsterInstance.ephemeral()

    result = materialize("*", instance=instance)

    assert result.success
    assert materialized(result) == set()
    assert checked(result) == set()
    assert tables_on_disk(settings) == set()  # no table written in a skipped one's place
    log = run_log(instance, result)
    assert "bronze.recordings skipped: nothing landed in landing/recordings yet" in log
    assert "silver.patients skipped: nothing landed in landing/patients yet" in log
    # Below a skipped table, Dagster skips the step, checks included.
    assert {"silver__recordings_enriched", "gold__daily_patient_avg", "silver_recordings_enriched_contract",
            "gold__patient_changes_data_freshness"} <= skipped_steps(result)


@pytest.mark.slow
def test_only_the_seeds_data_builds_the_seeds_pipeline_and_skips_the_change_flow(built):
    # The reference lakehouse's first build step: Materialize all with the seeds' data alone.
    settings, landed, run = built.settings, built.recordings, built.seeds_run
    result = run.result

    assert result.success
    assert materialized(result) == SEED_TABLES
    assert DeltaTable(str(settings.table_path("bronze", "recordings"))).to_pyarrow_table().num_rows == \
        landed.counts.total
    # The seeds' tables are checked; the skipped tables' checks never ran, so none failed.
    assert {"bronze/recordings", "silver/recordings_enriched", "gold/daily_patient_avg"} <= checked(result)
    assert not checked(result) & CHANGE_TABLES
    assert all(e.passed for e in result.get_asset_check_evaluations()
               if e.severity == dg.AssetCheckSeverity.ERROR)
    log = run.log()
    assert "bronze.patient_changes skipped: nothing landed in landing/patient_changes yet" in log
    assert "silver.patients_snapshot_history skipped: nothing landed in landing/patient_snapshots yet" in log
    assert {"silver__patients_current", "silver__patients_history", "gold__patient_changes"} <= skipped_steps(result)
    # Then the patient changes landed, and Materialize all built the change flow alone: the
    # seeds' tables had nothing new and wrote nothing.
    after = built.changes_run.result
    assert after.success
    assert CHANGE_TABLES <= materialized(after)
    for table in ("bronze/recordings", "silver/recordings_enriched", "gold/daily_patient_avg"):
        [event] = [e for e in after.get_asset_materialization_events() if e.asset_key.to_user_string() == table]
        assert event.materialization.metadata["written_version"].value == "none (nothing new)", table
        assert "rows_processed" not in event.materialization.metadata, table


@pytest.mark.slow
def test_only_patient_changes_landed_builds_the_change_flow_alone(spark, settings):
    land_patient_changes(settings.root / "landing", files=2)

    result = materialize("*")

    assert result.success
    assert materialized(result) == CHANGE_TABLES
    assert DeltaTable(str(settings.table_path("silver", "patients_current"))).to_pyarrow_table().num_rows > 0


@pytest.mark.slow
def test_landing_folders_deleted_after_their_tables_were_built_keep_the_tables(built):
    settings, landing = built.settings, built.landing
    patients_before = version(settings, "silver/patients")
    enriched_rows = DeltaTable(str(settings.table_path("silver", "recordings_enriched"))).to_pyarrow_table().num_rows
    more = built.land_recordings(files=1)
    shutil.rmtree(landing / "patients")
    shutil.rmtree(landing / "patient_changes")

    result = materialize("*")

    assert result.success
    # The lookup is kept as it stands, not overwritten with nothing; the new recordings
    # still flow through it to silver.
    assert version(settings, "silver/patients") == patients_before
    patients = result.asset_materializations_for_node("silver__patients")[0].metadata
    assert "landing/patients holds no files" in patients["not_written"].value
    assert DeltaTable(str(settings.table_path("silver", "recordings_enriched"))).to_pyarrow_table().num_rows == \
        enriched_rows + more.counts.good

    shutil.rmtree(landing / "recordings")
    bronze_before = version(settings, "bronze/recordings")

    result = materialize("*")

    assert result.success
    assert version(settings, "bronze/recordings") == bronze_before
    assert "bronze/recordings" in materialized(result)


@pytest.mark.slow
def test_a_table_materialized_alone_over_an_upstream_never_built_is_skipped(spark, settings):
    land(settings.root / "landing", files=1, **LANDING_OPTIONS)
    instance = dg.DagsterInstance.ephemeral()

    # An input read as a stream, a table read by name in SQL, and a check on a missing table.
    result = materialize(["silver/patients_current", "gold/daily_patient_avg"], instance=instance)
    checks = materialize(dg.AssetSelection.checks_for_assets(dg.AssetKey(["silver", "recordings_enriched"])),
                         instance=instance)

    assert result.success and checks.success
    assert materialized(result) == set()
    # The contract's checks have no table to read; data freshness still says how far behind
    # the landed files the table is (it holds none of them yet).
    [freshness] = checks.get_asset_check_evaluations()
    assert freshness.check_name == FRESHNESS_CHECK and freshness.metadata["pending_files"].value == 1
    assert "silver_recordings_enriched_contract" in {e.step_key for e in checks.all_events if e.is_step_success}
    assert not Path(settings.table_path("silver", "patients_current")).exists()
    log = run_log(instance, result)
    assert "silver.patients_current skipped: upstream bronze.patient_changes has no table yet" in log
    assert "gold.daily_patient_avg skipped: upstream silver.recordings_enriched has no table yet" in log


@pytest.mark.slow
def test_declarative_automation_carries_the_seeds_on_and_leaves_the_change_flow_alone(spark, settings):
    from lakehouse_assets.definitions import defs

    land(settings.root / "landing", files=1, **LANDING_OPTIONS)
    instance = dg.DagsterInstance.ephemeral()
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)  # the sensor's first tick
    # What the two landing sensors run when the seeds' files land.
    materialize(["bronze/recordings", "silver/patients"], instance=instance)

    tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    requested = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()
                 if tick.get_num_requested(key)}
    result = materialize(sorted(requested), instance=instance)

    assert {"silver/recordings_enriched", "gold/device_counts"} <= requested
    assert not requested & CHANGE_TABLES  # nothing landed for them: never requested
    assert result.success
    assert materialized(result) == requested


@pytest.mark.slow
def test_device_counts_alone_catches_up_with_bronze(built):
    settings = built.settings
    built.land_recordings(files=1)
    materialize("bronze/recordings")

    run = materialization_metadata(materialize("gold/device_counts"))

    assert set(run) == {"gold/device_counts"}
    # A record with no device belongs to none (malformed lines).
    bronze_counts = Counter(device_id for (device_id,) in delta_rows(settings, "bronze", "recordings", ["device_id"],
                                                                      key=repr) if device_id is not None)
    assert dict(delta_rows(settings, "gold", "device_counts", ["device_id", "total_recordings"])) == bronze_counts
