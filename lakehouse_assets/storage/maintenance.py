"""Table maintenance on delta-rs: compaction (OPTIMIZE, optionally Z-ordered) and VACUUM.

What each promises:

- A compaction changes no rows. Its one commit removes the small files and adds the
  compacted ones with ``dataChange=false``, which the project's stream source skips: a
  stream reading across it sees every row once. After it, a Delta log checkpoint is
  written, so opening the table reads one Parquet checkpoint and the commits after it,
  however many versions came before (delta-rs also writes one every
  ``delta.checkpointInterval`` commits, 100 by default).
- A VACUUM deletes only data files the table stopped listing more than ``retention`` ago
  (or never listed, the debris of failed writes, last modified that long ago), and none
  that a streaming reader of the table has yet to read: if it would, it refuses with
  :class:`~lakehouse_assets.errors.VacuumRefusedError` naming the table, the reader, the
  retention it needs and the ways out, and deletes nothing. It is delta-rs's *full* vacuum:
  a removed file's record (its tombstone) leaves the log's checkpoints after
  ``delta.deletedFileRetentionDuration`` (7 days), and a streaming table writes a
  checkpoint every few minutes, so the plain vacuum, which only sees tombstones, would find
  almost nothing a week later and the files would stay on disk for good (with a retention
  under a day, only files the log still records as removed go). Folders named
  ``_...`` (the AUTO CDC and aggregate state tables inside a table) are left alone, but for
  ``_change_data``. A dry run lists the files and deletes nothing. A real run then removes
  the log's expired commit files (``delta.logRetentionDuration``, 30 days by default),
  unless a reader still resumes from a version older than that: the stream source reads
  each version's commit file.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import replace

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from lakehouse_assets.errors import LakehouseError, VacuumRefusedError
from lakehouse_assets.storage._delta_log import read_commit
from lakehouse_assets.storage._files import table_file_path
from lakehouse_assets.storage.engine import OptimizeResult, StreamReader, VacuumResult
from lakehouse_assets.storage.stream_readers import files_still_needed

DEFAULT_RETENTION = dt.timedelta(days=7)
# A full vacuum also deletes files no commit lists yet, by their age on disk: the files of a
# write still in flight, by a writer that takes no table lock (COPY INTO), are among them
# when the retention is short. Below a day, only files the log records as removed go.
FULL_VACUUM_MIN_HOURS = 24
# Delta's default log retention, when the table does not set delta.logRetentionDuration.
_DEFAULT_LOG_RETENTION = "interval 30 days"
_INTERVAL = re.compile(r"^\s*interval\s+(\d+)\s+(second|minute|hour|day|week)s?\s*$", re.IGNORECASE)
# Commit files carry their writer's clock; leave a reader this much slack before log cleanup.
_CLOCK_SLACK = dt.timedelta(hours=1)


def optimize(table: DeltaTable, path: str, *, target_size: int | None = None,
             z_order: Sequence[str] | None = None) -> OptimizeResult:
    """Compact the table's small files into files of about ``target_size`` bytes (the
    table's ``delta.targetFileSize``, else 100 MB), or with ``z_order`` rewrite its files
    clustered by those columns; write a log checkpoint after a compaction that committed."""
    columns = tuple(z_order or ())
    if columns:
        known = {name.lower(): name for name in table.schema().to_arrow().names}
        missing = [c for c in columns if c.lower() not in known]
        if missing:
            raise LakehouseError(
                f"Cannot Z-order Delta table {path} by {missing}: it has no such column (its columns: "
                f"{', '.join(known.values())}). Give columns of the table.")
        columns = tuple(known[c.lower()] for c in columns)
    before = table.version()
    try:
        if columns:
            metrics = table.optimize.z_order(list(columns), target_size=target_size)
        else:
            metrics = table.optimize.compact(target_size=target_size)
    except DeltaError as exc:
        raise LakehouseError(
            f"Compaction of Delta table {path} failed: {exc}. Nothing was changed (a compaction commits "
            "all or nothing); run it again, when no other writer is changing the table's files.") from exc
    if table.version() == before:
        return OptimizeResult(str(path), None, z_order=columns)
    table.create_checkpoint()
    removed, added = _file_totals(metrics.get("filesRemoved")), _file_totals(metrics.get("filesAdded"))
    return OptimizeResult(
        str(path), table.version(),
        files_removed=int(metrics.get("numFilesRemoved") or 0), files_added=int(metrics.get("numFilesAdded") or 0),
        bytes_removed=removed, bytes_added=added, z_order=columns, log_checkpoint=table.version())


def vacuum(table: DeltaTable, path: str, *, retention: dt.timedelta, dry_run: bool,
           readers: Sequence[StreamReader]) -> VacuumResult:
    """Delete (or with ``dry_run`` list) the data files the table stopped listing more
    than ``retention`` ago (in whole hours, rounded up), after checking that none of them
    is still to be read by one of ``readers``."""
    if retention < dt.timedelta(0):
        raise LakehouseError(f"Cannot vacuum Delta table {path} with a negative retention ({retention}).")
    hours = math.ceil(retention.total_seconds() / 3600)
    try:
        candidates = table.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False,
                                  full=hours >= FULL_VACUUM_MIN_HOURS)
    except DeltaError as exc:
        raise LakehouseError(f"VACUUM of Delta table {path} failed to list its files: {exc}.") from exc
    if candidates:
        _refuse_if_needed(table, str(path), candidates, readers, hours)
    sizes = {name: _size(table_file_path(str(path), name)) for name in candidates}
    result = VacuumResult(str(path), dt.timedelta(hours=hours), dry_run, tuple(sorted(candidates)),
                          sum(sizes.values()), tuple(readers))
    if dry_run:
        return result
    if candidates:
        # The table lock keeps writers out, so the files deleted are those checked above (but
        # for one removed in the very second the retention ends).
        deleted = table.vacuum(retention_hours=hours, dry_run=False, enforce_retention_duration=False,
                               full=hours >= FULL_VACUUM_MIN_HOURS)
        result = replace(result, files=tuple(sorted(deleted)), bytes=sum(sizes.get(n, 0) for n in deleted))
    return replace(result, log_cleaned=_clean_expired_log(table, str(path), readers))


def _refuse_if_needed(table: DeltaTable, path: str, candidates: Sequence[str],
                      readers: Sequence[StreamReader], hours: int) -> None:
    doomed = {table_file_path(path, name) for name in candidates}
    latest = table.version()
    for reader in readers:
        try:
            needed = files_still_needed(path, reader, latest)
        except (OSError, DeltaError) as exc:
            raise VacuumRefusedError(
                f"Not vacuuming Delta table {path}: the streaming query writing {reader.name} (checkpoint "
                f"{reader.checkpoint}) resumes from version {reader.version}, which cannot be read any "
                f"more ({exc}), so which files it still needs is unknown. Reset {reader.name} "
                f"(`lakehouse reset {reader.name} --yes`), then vacuum again.") from exc
        clash = needed & doomed
        if not clash:
            continue
        needs = _hours_since(_commit_time(path, min(reader.version, latest)))
        raise VacuumRefusedError(
            f"Not vacuuming Delta table {path} with a retention of {hours} hours: the streaming query "
            f"writing {reader.name} (checkpoint {reader.checkpoint}) resumes from version {reader.version} "
            f"and has yet to read {len(clash)} of the {len(doomed)} files this would delete (e.g. "
            f"{sorted(clash)[0]}). It needs a retention of at least {needs} hours. Keep that much "
            f"(`lakehouse vacuum ... --retain-hours {needs}`), or let {reader.name} catch up first "
            f"(materialize it), then vacuum again. Nothing was deleted.")


def _clean_expired_log(table: DeltaTable, path: str, readers: Sequence[StreamReader]) -> bool:
    """Remove the log's commit files older than its retention (and than its last
    checkpoint), unless a reader resumes from before that: it reads those commits."""
    configured = (table.metadata().configuration or {}).get("delta.logRetentionDuration", _DEFAULT_LOG_RETENTION)
    log_retention = _interval(configured)
    if log_retention is None:
        return False  # a retention we cannot read: leave the log as it is
    cutoff = dt.datetime.now(dt.UTC) - log_retention + _CLOCK_SLACK
    latest = table.version()
    if any(_commit_time(path, min(r.version, latest)) < cutoff for r in readers):
        return False
    table.cleanup_metadata()
    return True


def _interval(text: str) -> dt.timedelta | None:
    match = _INTERVAL.match(str(text))
    if match is None:
        return None
    return dt.timedelta(**{match.group(2).lower() + "s": int(match.group(1))})


def _commit_time(path: str, version: int) -> dt.datetime:
    if version < 0:
        return dt.datetime.now(dt.UTC)
    return dt.datetime.fromtimestamp(read_commit(path, version).timestamp_ms / 1000, dt.UTC)


def _hours_since(moment: dt.datetime) -> int:
    return max(1, math.ceil((dt.datetime.now(dt.UTC) - moment).total_seconds() / 3600))


def _file_totals(text: object) -> int:
    """The total size from delta-rs's file metrics (``{"totalSize": ...}``, as JSON text)."""
    try:
        return int(json.loads(str(text)).get("totalSize") or 0)
    except (ValueError, AttributeError, TypeError):
        return 0


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # already gone, or not on a local file system


__all__ = ["DEFAULT_RETENTION", "optimize", "vacuum"]
