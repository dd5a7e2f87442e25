"""Table maintenance as a Dagster job on a daily schedule: every table under the lakehouse root
compacted (OPTIMIZE), then vacuumed with a week's retention.

Delta Lake does the work (OPTIMIZE, VACUUM) in the run's Spark session. Each table is
maintained under its write lock, so the job waits for a run writing it instead of racing
it, and its VACUUM is checked against every streaming reader
(:mod:`lakehouse_assets.tables.maintenance`). One table's failure (a VACUUM
refused because a reader lags) does not stop the others; the run then fails naming it.
What each table's maintenance did is recorded as an observation of the table's asset.
"""

# No ``from __future__ import annotations``: Dagster reads the op's config class from its
# annotation at definition time, and a string would not resolve.
import datetime as dt
from collections.abc import Iterator

import dagster as dg
from pydantic import Field

from lakehouse_assets.engine.client import engine_errors
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.tables.maintenance import TableMaintenance

#: Daily, at an hour when the sensors' runs are few: 03:00 UTC.
MAINTENANCE_CRON = "0 3 * * *"
DEFAULT_RETAIN_HOURS = 168
# A run writing a table holds its lock for one materialization; wait as long as writers wait.
LOCK_TIMEOUT_SECONDS = 900.0


class MaintenanceConfig(dg.Config):
    """What the maintenance run does; the defaults are the daily schedule's."""

    retain_hours: int = Field(default=DEFAULT_RETAIN_HOURS, ge=0,
                              description="VACUUM keeps files the table stopped listing less than this many hours ago")
    dry_run: bool = Field(default=False, description="VACUUM lists the files it would delete and deletes none")
    tables: list[str] = Field(default_factory=list, description="The tables (layer.name) to maintain; empty: all")
    z_order: dict[str, list[str]] = Field(
        default_factory=dict, description="Columns to Z-order a table's files by, per table (layer.name)")


@dg.op(description="Compact, then vacuum, every table under the lakehouse root (or those configured).",
       required_resource_keys={"lakehouse"})
def maintain_tables(context: dg.OpExecutionContext, config: MaintenanceConfig) -> Iterator[dg.AssetObservation]:
    """Maintain each table in turn; fail at the end naming the tables that could not be.
    A generator: each observation is recorded as it is yielded, so a failure at the end
    keeps the record of the tables that were maintained."""
    lakehouse = context.resources.lakehouse
    maintenance = TableMaintenance(lakehouse.spark_session, lakehouse.settings(), context.instance, lakehouse.store(),
                                   lock_timeout_seconds=LOCK_TIMEOUT_SECONDS,
                                   holder=f"Dagster run {context.run_id} (table maintenance)")
    # A lost engine fails the run once, naming it, rather than each remaining table in turn.
    with engine_errors(lakehouse.settings()):
        yield from _maintain(context, config, maintenance)


def _maintain(context: dg.OpExecutionContext, config: MaintenanceConfig,
              maintenance: TableMaintenance) -> Iterator[dg.AssetObservation]:
    names = [target for table in config.tables or maintenance.names() for target in maintenance.targets(table)]
    failures: dict[str, str] = {}
    for name in names:  # each table, then the state tables inside it
        try:
            optimized = maintenance.optimize(name, z_order=config.z_order.get(name))
            vacuumed = maintenance.vacuum(name, retention=dt.timedelta(hours=config.retain_hours),
                                          dry_run=config.dry_run)
        except LakehouseError as exc:
            context.log.error(f"{name}: {exc}")
            failures[name] = str(exc)
            continue
        context.log.info(f"{name}: compacted {optimized.files_removed} files into {optimized.files_added}; "
                         f"vacuum {'would delete' if vacuumed.dry_run else 'deleted'} {len(vacuumed.files)}")
        if "/" in name:
            continue  # a state table: no asset of its own
        yield dg.AssetObservation(asset_key=dg.AssetKey(name.split(".")), metadata={
            "optimize_version": optimized.version, "files_compacted": optimized.files_removed,
            "files_written": optimized.files_added, "vacuum_files": len(vacuumed.files),
            "vacuum_bytes": vacuumed.bytes, "vacuum_dry_run": vacuumed.dry_run,
            "stream_readers": ", ".join(f"{r.name}@{'?' if r.version is None else r.version}"
                                        for r in vacuumed.readers) or "none",
        })
    if failures:
        raise dg.Failure(
            description=f"{len(failures)} of {len(names)} tables were not maintained: {', '.join(failures)}. "
                        "Each message says why and what to do; the other tables were maintained.",
            metadata={name: dg.MetadataValue.text(message) for name, message in failures.items()})


@dg.job(name="table_maintenance", description="OPTIMIZE and VACUUM every table of the lakehouse")
def maintenance_job() -> None:
    maintain_tables()


maintenance_schedule = dg.ScheduleDefinition(
    name="daily_table_maintenance", job=maintenance_job, cron_schedule=MAINTENANCE_CRON, execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Compacts and vacuums every table daily (a week's retention; streaming readers respected).")


__all__ = ["MaintenanceConfig", "maintain_tables", "maintenance_job", "maintenance_schedule"]
