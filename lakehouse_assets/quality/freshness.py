"""Data-time freshness: a table's lag is the time since the oldest landed file it does not hold
yet landed (zero when it holds them all), read from the tables' commits down to bronze's
``_source_file``, not from run history. Dagster's freshness policies judge the time since a
materialization instead, which flags a table whose source is quiet (docs/operations.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.ingestion.files import list_data_files, local_file_path
from lakehouse_assets.ingestion.state import ingested_files
from lakehouse_assets.location import Location
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.tables.reading import completed_reading

#: How far behind a gold table may fall by default: the seeds' "no more than 5 minutes".
DEFAULT_MAX_LAG = dt.timedelta(minutes=5)
#: The check's name on each table that has one.
FRESHNESS_CHECK = "data_freshness"


@dataclass(frozen=True)
class FreshnessPath:
    """How ``table``'s rows come from landed files: through each table of ``through`` (its
    streaming source first, bronze last), from the landing folder of ``landing_source``."""

    table: str
    through: tuple[str, ...]
    landing_source: str

    @property
    def chain(self) -> tuple[str, ...]:
        """The table, then each source down to bronze."""
        return (self.table, *self.through)


@dataclass(frozen=True)
class DataLag:
    """How far a table is behind its landing folder, at ``measured_at``."""

    measured_at: dt.datetime
    landed_files: int
    #: Landed files the table does not incorporate yet, oldest first (their paths).
    pending: tuple[str, ...]
    #: When the oldest pending file landed; None when nothing is pending.
    oldest_pending_at: dt.datetime | None
    newest_landed_at: dt.datetime | None

    @property
    def lag(self) -> dt.timedelta:
        """Time since the oldest landed file the table lacks landed; zero when it lacks none."""
        if self.oldest_pending_at is None:
            return dt.timedelta(0)
        return max(dt.timedelta(0), self.measured_at - self.oldest_pending_at)


def data_lag(settings: LakehouseSettings, store: DeltaTableStore, path: FreshnessPath,
             instance: dg.DagsterInstance | None = None, now: dt.datetime | None = None) -> DataLag:
    """How far ``path.table`` is behind the files landed for it (see the module's docstring);
    ``instance`` says which of its runs completed."""
    measured_at = now or dt.datetime.now(dt.UTC)
    landed = list_data_files(settings.landing_path(path.landing_source), recursive=True)
    incorporated = incorporated_files(settings, store, path.chain, instance)
    pending = [f for f in landed if local_file_path(f.path) not in incorporated]
    return DataLag(
        measured_at=measured_at,
        landed_files=len(landed),
        pending=tuple(local_file_path(f.path) for f in pending),
        oldest_pending_at=min((f.modification_time for f in pending), default=None),
        newest_landed_at=max((f.modification_time for f in landed), default=None),
    )


def incorporated_files(settings: LakehouseSettings, store: DeltaTableStore, chain: Sequence[str],
                       instance: dg.DagsterInstance | None = None) -> set[str]:
    """The landed files (local paths) whose records the first table of ``chain`` holds, its
    sources following it down to the ingesting table (the last)."""
    version: int | None = None  # the version of the current table to look from; None: latest
    for table, source in zip(chain[:-1], chain[1:], strict=True):
        reading = completed_reading(store, str(_path(settings, table)), version, instance,
                                    dg.AssetKey(table.split(".")))
        read = reading.tables.get(source) if reading is not None else None
        if read is None:
            return set()
        version = read.version
    bronze = str(_path(settings, chain[-1]))
    version = store.version(bronze) if version is None else version
    if version is None:
        return set()
    return {local_file_path(f) for f in ingested_files(store, [bronze], version=version)}


def _path(settings: LakehouseSettings, table: str) -> Location:
    return settings.table_path(*table.split("."))


def freshness_result(lag: DataLag, max_lag: dt.timedelta) -> dg.AssetCheckResult:
    """The ``data_freshness`` check's result for ``lag``: failed when the table is more than
    ``max_lag`` behind, with what it lacks."""
    fresh = lag.lag <= max_lag
    if not lag.pending:
        description = f"Holds every landed file ({lag.landed_files})."
    else:
        description = (f"{len(lag.pending)} landed files not incorporated yet; the oldest landed "
                       f"{_minutes(lag.lag)} ago (allowed: {_minutes(max_lag)}).")
    metadata: dict[str, Any] = {
        "lag_seconds": dg.MetadataValue.float(round(lag.lag.total_seconds(), 1)),
        "max_lag_seconds": dg.MetadataValue.float(max_lag.total_seconds()),
        "pending_files": dg.MetadataValue.int(len(lag.pending)),
        "landed_files": dg.MetadataValue.int(lag.landed_files),
    }
    if lag.pending:
        metadata["oldest_pending_file"] = dg.MetadataValue.path(lag.pending[0])
    for name, when in (("oldest_pending_landed_at", lag.oldest_pending_at), ("newest_landed_at", lag.newest_landed_at)):
        if when is not None:
            metadata[name] = dg.MetadataValue.timestamp(when)
    return dg.AssetCheckResult(passed=fresh, severity=dg.AssetCheckSeverity.ERROR, description=description,
                               metadata=metadata)


def freshness_check(path: FreshnessPath, max_lag: dt.timedelta = DEFAULT_MAX_LAG) -> dg.AssetChecksDefinition:
    """The ``data_freshness`` check of ``path.table``: at most ``max_lag`` behind the newest
    landed record (data time). It reads commits and a column of the ingesting table: no Spark."""
    layer, name = path.table.split(".")

    @dg.asset_check(asset=dg.AssetKey([layer, name]), name=FRESHNESS_CHECK, blocking=False,
                    required_resource_keys={"lakehouse"},
                    description=f"At most {_minutes(max_lag)} behind the records landed in "
                                f"landing/{path.landing_source} (data time, through {' <- '.join(path.through)})")
    def data_freshness(context) -> dg.AssetCheckResult:  # type: ignore[no-untyped-def]  # Dagster refuses a string annotation
        lakehouse = context.resources.lakehouse
        return freshness_result(data_lag(lakehouse.settings(), lakehouse.store(), path, context.instance), max_lag)

    return data_freshness


def _minutes(delta: dt.timedelta) -> str:
    seconds = delta.total_seconds()
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
