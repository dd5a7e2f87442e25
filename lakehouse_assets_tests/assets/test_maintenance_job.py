"""The daily maintenance job: every table compacted and vacuumed, a lagging reader's table
refused by name while the others are still maintained; in Definitions on a daily schedule."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from lakehouse_assets.assets.maintenance import maintenance_job
from lakehouse_assets.definitions import defs
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage.batch_record import TableVersion
from lakehouse_assets_tests.tables.readings import record_reading


def _three_commits(root: Path, layer: str, name: str) -> Path:
    path = root / layer / name
    for ids in ([1, 2], [3], [4]):
        write_deltalake(str(path), pa.table({"id": ids}), mode="append")
    return path


def _files(path: Path) -> int:
    return len(list(path.glob("*.parquet")))


def test_the_job_maintains_every_table_and_fails_naming_a_refused_one(
    spark: SparkSession, settings: LakehouseSettings
) -> None:
    root = Path(settings.root)
    events = _three_commits(root, "bronze", "events")
    other = _three_commits(root, "silver", "other")
    # gold.reader's query has read bronze.events to version 0, as its last completed run's commit says.
    Path(settings.checkpoint_path("gold", "reader")).mkdir(parents=True)
    instance = dg.DagsterInstance.ephemeral()
    record_reading(settings, instance, "gold.reader",
                   {"bronze.events": TableVersion(str(DeltaTable(str(events)).metadata().id), 0)})

    result = maintenance_job.execute_in_process(
        run_config={"ops": {"maintain_tables": {"config": {"retain_hours": 0}}}}, raise_on_error=False,
        resources={"lakehouse": LakehouseResource.from_settings(LakehouseSettings.from_env())}, instance=instance)

    assert not result.success
    failure = result.failure_data_for_node("maintain_tables")
    assert failure is not None and "bronze.events" in str(failure.error) and "silver.other" not in str(failure.error)
    # Both compacted; only silver.other vacuumed: bronze.events keeps what gold.reader needs.
    assert [h["operation"] for h in DeltaTable(str(events)).history(1)] == ["OPTIMIZE"]
    assert _files(events) == 4 and _files(other) == 1
    observed = {tuple(e.asset_key.path) for e in result.get_asset_observation_events()}
    assert observed == {("silver", "other"), ("gold", "reader")}


def test_the_job_is_scheduled_daily_in_definitions() -> None:
    schedule = defs.resolve_schedule_def("daily_table_maintenance")
    assert schedule.cron_schedule == "0 3 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    assert defs.resolve_job_def("table_maintenance").name == "table_maintenance"
