"""The streaming queries reading a table, found in their checkpoints, and the files they
still need.

A query reading a Delta table through Delta's streaming source logs in ``offsets/N``, before
batch N runs, where the batch ends in each table it reads (:mod:`~lakehouse_assets.storage.delta_offsets`:
the table's id, a version, a file index in it). A restarted query resumes from the
end of its last finished batch, or replays its first from the start: that position is the
oldest part of the table it will still read. VACUUM must not delete a file the query has
yet to read, so it asks here.

Readers are found by reading every checkpoint under the lakehouse's ``_checkpoints`` folder,
not by loading the asset graph, so a query that no asset defines any more still counts.
Checkpoints moved aside by a repair (``.<name>.damaged-...``) are not readers.
"""

from __future__ import annotations

from pathlib import Path

from lakehouse_assets.storage._checkpoint_files import batch_ids, read_batch_offsets, table_name_of
from lakehouse_assets.storage._delta_log import read_commit, snapshot_files
from lakehouse_assets.storage._files import locate
from lakehouse_assets.storage.delta_offsets import DeltaSourcePosition
from lakehouse_assets.storage.engine import StreamReader


def stream_readers(table_path: str, table_id: str | None, checkpoints: Path) -> list[StreamReader]:
    """The queries checkpointed under ``checkpoints`` that read the table with id
    ``table_id`` (a reader of a table since recreated reads nothing of this one), each at
    the position it resumes from; by checkpoint."""
    found = []
    for folder in _checkpoint_folders(Path(checkpoints)):
        position = _resume_position(str(folder), table_id) if table_id is not None else None
        if position is not None:
            found.append(StreamReader(
                checkpoint=str(folder), name=table_name_of(str(folder)), version=position.version,
                index=position.index, snapshot=position.starting))
    return found


def files_still_needed(table_path: str, reader: StreamReader, latest: int) -> set[str]:
    """The data files (absolute paths) ``reader`` has yet to read, up to version ``latest``:
    the snapshot it is reading, then every file each later version adds, removes (a change
    feed reads removed files as deletes) or records as changes. Version by version from its
    commit files. A version the reader is part way through counts whole: Delta orders a
    version's files its own way, and keeping a file too many is safe."""
    path = str(table_path)
    needed: set[str] = set()
    first = reader.version
    if reader.snapshot:
        if reader.version >= 0:
            needed.update(f.path for f in snapshot_files(path, reader.version))
        first = reader.version + 1
    for version in range(max(first, 0), latest + 1):
        commit = read_commit(path, version)
        needed.update(f.path for f in (*commit.added, *commit.removed, *commit.changes))
    return needed


def _checkpoint_folders(base: Path) -> list[Path]:
    """Every folder under ``base`` that holds a query's offset log, skipping hidden ones."""
    if not base.is_dir():
        return []
    found: list[Path] = []
    pending = [base]
    while pending:
        folder = pending.pop()
        if (folder / "offsets").is_dir():
            found.append(folder)
            continue
        pending.extend(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    return sorted(found)


def _resume_position(location: str, table_id: str) -> DeltaSourcePosition | None:
    """Where the query at ``location`` resumes reading the table with id ``table_id``; None
    when it does not read it (or reads an older incarnation of it)."""
    checkpoint = locate(location)
    planned = batch_ids(checkpoint.child("offsets"))
    done = set(batch_ids(checkpoint.child("commits")))
    if not planned:
        return None
    finished = [b for b in planned if b in done]
    # Resume from the end of the last finished batch; with none finished, the first batch is
    # replayed from its start, which is at least the start of the version it ends in.
    batch = finished[-1] if finished else planned[0]
    offsets = read_batch_offsets(location, batch)
    if offsets is None:
        return None
    for position in map(DeltaSourcePosition.parse, offsets.sources):
        if position is None or position.table_id != table_id:
            continue
        if not finished:
            return DeltaSourcePosition(position.table_id, position.version, -1, position.starting)
        return position
    return None


__all__ = ["files_still_needed", "stream_readers"]
