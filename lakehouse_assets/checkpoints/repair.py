"""Rebuild a damaged or mismatched streaming checkpoint from what its Delta tables hold.

Spark's only way out of a damaged checkpoint is a full refresh: delete the table and the
checkpoint and read every source again. Here each batch's Delta commit records the query's
app transaction (query id, batch id) and what Spark logged for the batch (its source
offsets, watermark and timestamp, :data:`~lakehouse_assets.storage.sink.OFFSETS_KEY`). So
the checkpoint can be written again as it stood just after the last batch the table holds,
under the same query id; the next run plans the following batch from there, and the sink's
app transactions keep working as before. Nothing is read twice and nothing is skipped:

* **Delta sources** (silver from bronze, gold from silver): ``offsets/T`` holds the offsets
  the table's commit of batch T recorded, ``commits/T`` marks it done.
* **The file source** (bronze from landing files): the files bronze holds rows of (its
  ``_source_file`` column) are written to the source's file log as already seen. Bronze
  written by Delta's own sink records no offsets, and needs none.
* **A routed query** writes two tables per batch, the quarantine first. If a run died
  between the two writes (quarantine at batch T+1, the table at T), the checkpoint is
  rebuilt with batch T+1 planned and not done: the next run replays it, the quarantine skips
  it, the table gets it. Exactly the state Spark itself leaves after such a crash.
* **Stateful queries** (complete-mode aggregations, gold) keep their aggregation state in the
  checkpoint, which no table holds. They are restarted instead: a new checkpoint that reads
  the source from the start; complete mode replaces the table's contents at each batch, so
  nothing is duplicated, only recomputed.

The old checkpoint is never deleted: it is moved beside the new one, hidden from listings
(``<layer>/.<name>.damaged-<UTC time>``).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow.compute as pc

from lakehouse_assets.checkpoints.checkpoint import recorded_offsets
from lakehouse_assets.checkpoints.logs import (
    FILE_SOURCE_START,
    BatchOffsets,
    file_log_entry,
    keeps_state,
    planned_batches,
    read_batch_offsets,
    reads_files,
    table_name_of,
    write_checkpoint,
)
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.location import local_path
from lakehouse_assets.storage.engine import HistoryEntry
from lakehouse_assets.storage.history import newest_first
from lakehouse_assets.storage.sink import OUTPUT_MODE_KEY, READS_FILES_KEY

if TYPE_CHECKING:
    from lakehouse_assets.storage.delta import DeltaTableStore

RepairKind = Literal["resumed", "restarted"]


@dataclass(frozen=True)
class RepairResult:
    """What a repair did. ``resumed``: the checkpoint stands after batch ``last_batch`` of
    query ``query_id`` (``replays_batch`` is planned, not done); ``restarted``: the query
    starts over from its source (stateful, or nothing written yet)."""

    checkpoint: str
    kind: RepairKind
    moved_to: str | None
    query_id: str | None = None
    last_batch: int | None = None
    replays_batch: int | None = None
    reason: str = ""


def repair_checkpoint(
    store: DeltaTableStore,
    checkpoint_location: str,
    table_paths: Sequence[str],
    *,
    table_name: str | None = None,
    source_file_column: str,
    logged_offsets: Mapping[tuple[str, int], BatchOffsets] | None = None,
) -> RepairResult:
    """Rebuild the checkpoint at ``checkpoint_location`` from the tables its query writes
    (``table_paths``: the table first, then its quarantine for a routed query), and the
    batch offsets the event log holds for commits that record none (``logged_offsets``).

    The old checkpoint, if any, is moved aside and kept. Raises
    :class:`~lakehouse_assets.errors.LakehouseError` when the tables do not record enough
    to rebuild it (commits from before batch offsets were recorded, or tables that disagree
    by more than one batch): a full refresh is then the way out. Hold the tables' write
    locks while repairing (the ``lakehouse repair`` command does).
    """
    location = str(checkpoint_location)
    name = table_name or table_name_of(location)
    main = str(table_paths[0])
    last = _last_streaming_commit(store, main)
    if last is None:
        if _has_rows(store, main):
            raise LakehouseError(
                f"Cannot rebuild checkpoint {location}: the table {main} holds rows but no commit of a "
                f"streaming query, so nothing says what it has read. Full-refresh it: `lakehouse reset {name}`."
            )
        moved = _move_aside(location)
        return RepairResult(location, "restarted", moved, reason="the table holds nothing from the query yet")
    query_id = str(last.query)
    complete = last.custom_metadata.get(OUTPUT_MODE_KEY) == "complete"
    if keeps_state(location) and not complete:
        # Windows or deduplicated rows already appended would be appended again by a query
        # reading its source from the start, and the state that says which is in the checkpoint.
        raise LakehouseError(
            f"Cannot rebuild checkpoint {location}: query {query_id} keeps state (windows, a watermark) only "
            f"in its checkpoint and appends to {main}, so neither resuming nor restarting it keeps each row "
            f"once. Full-refresh it: `lakehouse reset {name}`.")
    if complete or keeps_state(location):
        moved = _move_aside(location)
        return RepairResult(
            location, "restarted", moved, query_id=query_id,
            reason="a stateful (complete-mode) query keeps its aggregation state only in its checkpoint; "
                   "the next run reads its source from the start and replaces the table's contents",
        )

    held = {path: store.committed_batch(str(path), query_id) for path in table_paths}
    missing = [p for p, b in held.items() if b is None]
    if missing:
        raise LakehouseError(
            f"Cannot rebuild checkpoint {location}: {', '.join(map(str, missing))} holds no batch of query "
            f"{query_id}, which wrote {main} last. Full-refresh {name}: `lakehouse reset {name}`."
        )
    batches = [b for b in held.values() if b is not None]  # every table holds one: checked above
    low, high = min(batches), max(batches)
    if high - low > 1:
        raise LakehouseError(
            f"Cannot rebuild checkpoint {location}: the tables of query {query_id} hold batches "
            f"{', '.join(f'{p}: {b}' for p, b in held.items())}, further apart than one interrupted batch. "
            f"Full-refresh {name}: `lakehouse reset {name}`."
        )
    commits = {batch: _batch_commit(store, table_paths, query_id, batch)
               for batch in {low, high, high - 1} if batch >= 0}
    offsets = {batch: recorded_offsets(commit, logged_offsets) if commit is not None else None
               for batch, commit in commits.items()}
    conf = _old_conf(location)
    files: list[dict[str, Any]] | None = None
    high_offsets = offsets[high]
    if last.custom_metadata.get(READS_FILES_KEY) == "true" or (high_offsets is not None and reads_files(high_offsets)):
        # The file source's offset is a position in its own file log, rebuilt here as one
        # entry (log position 0) listing every file the table holds rows of. Delta's own
        # sink records no offsets: the batch's time is its commit's.
        files = _ingested_files(store, main, source_file_column)
        for batch, commit in commits.items():
            if commit is not None:
                recorded = offsets[batch]
                offsets[batch] = BatchOffsets(
                    recorded.watermark_ms if recorded else 0,
                    recorded.timestamp_ms if recorded else int(commit.timestamp.timestamp() * 1000),
                    FILE_SOURCE_START)
    for batch in (low, high):
        if offsets[batch] is None:
            raise LakehouseError(
                f"Cannot rebuild checkpoint {location}: the commit of batch {batch} of query {query_id} "
                f"does not record its source offsets, nor does the event log (it predates this feature, or "
                f"its run died before logging it and its checkpoint is lost). "
                f"Full-refresh {name}: `lakehouse reset {name}`."
            )
    if offsets.get(high - 1) is None and high >= 1:
        # Spark reads offsets/<last - 1> on restart; when the last batch is done it only
        # needs to parse (the next batch starts from the last batch's offsets).
        offsets[high - 1] = offsets[high]
    staging = Path(f"{location.rstrip('/')}.repairing-{_stamp()}")
    write_checkpoint(staging, query_id, offsets, conf, done=low, files=files)  # type: ignore[arg-type]
    moved = _move_aside(location)
    os.replace(staging, location)
    return RepairResult(
        location, "resumed", moved, query_id=query_id, last_batch=low,
        replays_batch=high if high != low else None,
        reason="rebuilt from the tables' app transactions and recorded batch offsets",
    )


def tables_written_by(
    store: DeltaTableStore, candidates: Mapping[str, str], main_path: str, checkpoint_query_id: str | None
) -> dict[str, str]:
    """Of ``candidates`` (name to path), the tables that the query writing ``main_path`` also
    writes (a routed query's quarantine): those holding a batch of its query id. The id is
    the one of the main table's last streaming commit; the checkpoint's own id only counts
    when the table has none (a checkpoint may belong to another table)."""
    last = _last_streaming_commit(store, main_path)
    query_id = str(last.query) if last is not None else checkpoint_query_id
    if query_id is None:
        return {}
    return {name: path for name, path in candidates.items() if store.committed_batch(path, query_id) is not None}


# -- what the tables say ------------------------------------------------------------------------
def _last_streaming_commit(store: DeltaTableStore, path: str) -> HistoryEntry | None:
    if not store.exists(path):
        return None
    for entry in store.history(path):
        if entry.query and entry.batch_id is not None:
            return entry
    return None


def _batch_commit(store: DeltaTableStore, paths: Sequence[str], query_id: str, batch: int) -> HistoryEntry | None:
    """The commit of batch ``batch`` of query ``query_id``, in the first of ``paths`` that
    holds one recording its offsets, else in any."""
    found = None
    for path in paths:
        if not store.exists(str(path)):
            continue
        for entry in newest_first(store, str(path)):
            if entry.query == query_id and entry.batch_id == batch:
                if recorded_offsets(entry) is not None:
                    return entry
                found = found or entry
    return found


def _has_rows(store: DeltaTableStore, path: str) -> bool:
    return store.exists(path) and bool(store.snapshot(path).files())


def _ingested_files(store: DeltaTableStore, path: str, column: str) -> list[dict[str, Any]]:
    """Every file the table holds rows of, as the file source's log spells them."""
    snapshot = store.snapshot(path)
    if column not in snapshot.column_names():
        raise LakehouseError(
            f"Cannot rebuild the file source's log from {path}: it has no {column} column naming the "
            "file of each row. Full-refresh the table."
        )
    paths = pc.unique(snapshot.to_arrow([column]).column(column).cast("string")).to_pylist()
    return [file_log_entry(source_file, _mtime_ms(source_file)) for source_file in sorted(p for p in paths if p)]


def _mtime_ms(path: str) -> int:
    try:
        return int(os.stat(local_path(path)).st_mtime * 1000)
    except OSError:
        return 0  # gone since: it is listed as seen all the same, so it is never read again


def _old_conf(location: str) -> dict[str, str]:
    """The session settings Spark logged in the old checkpoint, when a file still says."""
    for batch in reversed(planned_batches(location)):
        found = read_batch_offsets(location, batch)
        if found is not None and found.conf:
            return found.conf
    return {}


def _move_aside(location: str) -> str | None:
    """Keep the old checkpoint, hidden from listings: ``<parent>/.<name>.damaged-<time>``."""
    folder = Path(location)
    if not folder.exists():
        return None
    target = folder.parent / f".{folder.name}.damaged-{_stamp()}"
    os.replace(folder, target)
    return str(target)


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")


__all__ = ["RepairResult", "repair_checkpoint", "tables_written_by"]
