"""Data-time freshness: how far a table is behind the records that have landed.

A table is as fresh as the oldest landed file it does not incorporate yet: its lag is the time
since that file landed (its modification time), and zero when it incorporates every landed
file, however long ago it last ran. Nothing landing is never staleness; a pipeline that
stops while files keep landing is.

What a table incorporates is read from the tables' own logs, not from run history: its
newest batch commit records the offsets its query read its source up to (the source version
it had read whole), that source's commit at that version records its own, and so on down to
bronze, whose batch ids map to landed files through its query's checkpoint (the file source
log). A version read only in part counts as not read, so the lag is never understated.

Dagster's own freshness policies judge the time since an asset last materialized, which
flags a table whose source is simply quiet; this is the data-time measure the lakehouse
reports, as an asset check (:func:`freshness_check`) evaluated after each materialization
and by the freshness sensor between runs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.checkpoints.checkpoint import BatchOffsets, Checkpoint, recorded_offsets
from lakehouse_assets.checkpoints.delta_offsets import delta_source_end
from lakehouse_assets.ingestion.files import list_data_files, local_file_path
from lakehouse_assets.location import Location
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore, HistoryEntry
from lakehouse_assets.storage.event_log import event_log_path, logged_offsets
from lakehouse_assets.storage.history import newest_first

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
             now: dt.datetime | None = None) -> DataLag:
    """How far ``path.table`` is behind the files landed for it (see the module's docstring)."""
    measured_at = now or dt.datetime.now(dt.UTC)
    landed = list_data_files(settings.landing_path(path.landing_source), recursive=True)
    incorporated = incorporated_files(settings, store, path.chain)
    pending = [f for f in landed if local_file_path(f.path) not in incorporated]
    return DataLag(
        measured_at=measured_at,
        landed_files=len(landed),
        pending=tuple(local_file_path(f.path) for f in pending),
        oldest_pending_at=min((f.modification_time for f in pending), default=None),
        newest_landed_at=max((f.modification_time for f in landed), default=None),
    )


def incorporated_files(settings: LakehouseSettings, store: DeltaTableStore, chain: Sequence[str]) -> set[str]:
    """The landed files (local paths) whose records the first table of ``chain`` holds, its
    sources following it down to bronze (the last)."""
    version: int | None = None  # the version of the current table to look from; None: latest
    for table, source in zip(chain[:-1], chain[1:], strict=True):
        read_through = _source_version_read(settings, store, table, source, version)
        if read_through is None:
            return set()
        version = read_through
    bronze = chain[-1]
    batch = _last_batch_at(store, str(_path(settings, bronze)), version)
    if batch is None:
        return set()
    log = Checkpoint(str(settings.checkpoint_path(*bronze.split(".")))).file_source_log()
    return {local_file_path(entry.path) for entry in log if entry.batch_id <= batch}


def _source_version_read(settings: LakehouseSettings, store: DeltaTableStore, table: str, source: str,
                         version: int | None) -> int | None:
    """The newest version of ``table``'s streaming ``source`` that the table, at ``version``,
    had read whole; None when it has read none."""
    logged = logged_offsets(event_log_path(settings.root), table)
    commit = _newest_batch_commit(store, str(_path(settings, table)), version, logged)
    if commit is None:
        return None
    offsets = recorded_offsets(commit, logged)
    end = delta_source_end(offsets) if offsets is not None else None
    return end.version_read_whole(str(_path(settings, source))) if end is not None else None


def _last_batch_at(store: DeltaTableStore, path: str, version: int | None) -> int | None:
    commit = _newest_batch_commit(store, path, version)
    return commit.batch_id if commit is not None else None


def _newest_batch_commit(store: DeltaTableStore, path: str, version: int | None,
                         offsets: Mapping[tuple[str, int], BatchOffsets] | None = None) -> HistoryEntry | None:
    """The newest commit of a query's batch at or before ``version`` (the latest: None); with
    ``offsets`` (the event log's), the newest whose offsets are known. The log is read newest
    first, the whole of it only when the newest commits do not have one."""
    for entry in newest_first(store, path):
        if version is not None and entry.version > version:
            continue
        if entry.batch_id is not None and (offsets is None or recorded_offsets(entry, offsets) is not None):
            return entry
    return None


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
    landed record (data time). It reads logs only: no Spark."""
    layer, name = path.table.split(".")

    @dg.asset_check(asset=dg.AssetKey([layer, name]), name=FRESHNESS_CHECK, blocking=False,
                    required_resource_keys={"spark"},
                    description=f"At most {_minutes(max_lag)} behind the records landed in "
                                f"landing/{path.landing_source} (data time, through {' <- '.join(path.through)})")
    def data_freshness(context) -> dg.AssetCheckResult:  # type: ignore[no-untyped-def]  # Dagster refuses a string annotation
        lakehouse = context.resources.spark
        return freshness_result(data_lag(lakehouse.settings(), lakehouse.store(), path), max_lag)

    return data_freshness


def _minutes(delta: dt.timedelta) -> str:
    seconds = delta.total_seconds()
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
