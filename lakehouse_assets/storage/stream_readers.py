"""The streaming queries reading a table, found in their checkpoints, and the files they
still need.

A query reading a Delta table through the project's source (:mod:`~lakehouse_assets.storage.source`)
logs in ``offsets/N``, before batch N runs, where the batch ends in each table it reads:
``{"version", "index", "snapshot", "table", "tableId"}``. A restarted query resumes from the
end of its last finished batch, or replays its first from the start: that position is the
oldest part of the table it will still read. VACUUM must not delete a file the query has
yet to read, so it asks here.

Readers are found by reading every checkpoint under the lakehouse's ``_checkpoints`` folder,
not by loading the asset graph, so a query that no asset defines any more still counts.
Checkpoints moved aside by a repair (``.<name>.damaged-...``) are not readers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lakehouse_assets.storage._checkpoint_files import batch_ids, read_batch_offsets, table_name_of
from lakehouse_assets.storage._delta_log import read_commit, snapshot_files
from lakehouse_assets.storage._files import locate
from lakehouse_assets.storage.change_feed import change_files
from lakehouse_assets.storage.engine import StreamReader


def stream_readers(table_path: str, table_id: str | None, checkpoints: Path) -> list[StreamReader]:
    """The queries checkpointed under ``checkpoints`` that read the table at ``table_path``
    (its incarnation ``table_id``: a reader of a table since recreated reads nothing of this
    one), each at the position it resumes from; by checkpoint."""
    found = []
    for folder in _checkpoint_folders(Path(checkpoints)):
        position = _resume_position(str(folder), str(table_path), table_id)
        if position is not None:
            found.append(StreamReader(
                checkpoint=str(folder), name=table_name_of(str(folder)), version=int(position["version"]),
                index=int(position.get("index", -1)), snapshot=bool(position.get("snapshot", False))))
    return found


def files_still_needed(table_path: str, reader: StreamReader, latest: int) -> set[str]:
    """The data files (absolute paths) ``reader`` has yet to read, up to version ``latest``:
    the rest of the snapshot it is reading, then every file each later version adds, removes
    (a change feed reads removed files as deletes) or records as changes. Version by version
    from its commit files, as the source reads them."""
    path = str(table_path)
    needed: set[str] = set()
    first = reader.version
    if reader.snapshot:
        if reader.version >= 0:
            needed.update(f.path for f in snapshot_files(path, reader.version)[reader.index + 1:])
        first = reader.version + 1
    for version in range(max(first, 0), latest + 1):
        commit = read_commit(path, version)
        # The index counts a plain reader's added files, or a change feed reader's change
        # files: past it in either list is still to be read.
        skip = reader.index + 1 if version == reader.version and not reader.snapshot else 0
        needed.update(f.path for f in commit.added[skip:])
        needed.update(f.path for f in change_files(commit)[skip:])
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


def _resume_position(location: str, table_path: str, table_id: str | None) -> dict[str, Any] | None:
    """Where the query at ``location`` resumes reading ``table_path``; None when it does not
    read it (or reads an older incarnation of it)."""
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
    wanted = _normal(table_path)
    for offset in offsets.sources:
        if not isinstance(offset, dict) or _normal(str(offset.get("table", ""))) != wanted:
            continue
        if table_id is not None and offset.get("tableId") not in (None, table_id):
            continue
        if not finished:
            return {**offset, "index": -1}
        return offset
    return None


def _normal(path: str) -> str:
    """A table path as comparable text: local paths absolute, without a trailing slash."""
    return path.rstrip("/") if "://" in path else os.path.abspath(path)


__all__ = ["files_still_needed", "stream_readers"]
