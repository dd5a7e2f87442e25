"""Where a query reading a Delta table stands, from the offsets Delta's streaming source logs
in the query's checkpoint (``offsets/N``, one JSON line per source), which each batch's
commit (:data:`~lakehouse_assets.storage.sink.OFFSETS_KEY`) or the event log records.

Delta's offset is ``{"sourceVersion", "reservoirId", "reservoirVersion", "index",
"isStartingVersion"}``: the table's id, the version the source stands in, and the index of
the last file it read there (-1: none yet). Reading the snapshot a new query starts from,
``isStartingVersion`` is true; once a version is read whole, a plain read moves to its end
index (or the next version's index -1), a change feed read stays at its last file. Offsets
name the table by id, not by path: a table is found from its id among the lakehouse's tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.settings import SYSTEM_DIR, SYSTEM_LAYER
from lakehouse_assets.storage._checkpoint_files import BatchOffsets
from lakehouse_assets.storage._delta_log import read_commit
from lakehouse_assets.storage.discovery import discover_tables

# Delta's index for "every file of this version read" (Long.MaxValue).
_END_INDEX = 2**63 - 1
# The offset serializations Delta Lake 4.x writes: 1, and 3 when a schema change is tracked
# (its indexes -20 and -19 fall before a version's files); Delta reserves 2.
_SOURCE_VERSIONS = frozenset({1, 3})


@dataclass(frozen=True)
class DeltaSourcePosition:
    """One Delta source's position: in table ``table_id``, at ``version``, after file
    ``index`` of it (-1: before its first), reading the starting snapshot or not."""

    table_id: str
    version: int
    index: int
    starting: bool

    @classmethod
    def parse(cls, offset: Any, where: str = "A streaming query's checkpoint") -> DeltaSourcePosition | None:
        """The position in a parsed offset line; None for a source that is not Delta's. An
        offset of a serialization version this module was not written for is refused by
        name rather than misread (a Delta Lake upgrade that changed it); ``where`` says whose
        offset it is."""
        if not isinstance(offset, dict) or "reservoirId" not in offset or "reservoirVersion" not in offset:
            return None
        if offset.get("sourceVersion", 1) not in _SOURCE_VERSIONS:
            raise LakehouseError(
                f"{where} holds a Delta source offset of serialization version "
                f"{offset.get('sourceVersion')!r} ({json.dumps(offset)}), which lakehouse_assets does not read: "
                f"it reads versions {', '.join(map(str, sorted(_SOURCE_VERSIONS)))} (Delta Lake 4.x's). The "
                "Delta Lake the engine runs is newer than this lakehouse_assets knows; use the Delta Lake "
                "version its install pins (jars/), or a lakehouse_assets release that reads this one.")
        return cls(str(offset["reservoirId"]), int(offset["reservoirVersion"]),
                   int(offset.get("index", -1)), bool(offset.get("isStartingVersion", False)))

    def version_read_whole(self, table_path: str) -> int | None:
        """The newest version of the table (at ``table_path``) this position has read every
        row of; None when it has read none whole (a snapshot read in part counts as nothing
        read)."""
        if self.starting:
            return None
        unread = self.first_unread_version(table_path)
        return unread - 1 if unread >= 1 else None

    def first_unread_version(self, table_path: str) -> int:
        """The oldest version of the table (at ``table_path``) this position has not read
        whole. A plain read ends a version at its end index, or at index -1 of the next; a
        change feed read ends it at the index of its last file, so the version's commit says."""
        if self.index == _END_INDEX:
            return self.version + 1
        if self.index >= 0 and self.index >= _indexed_files(table_path, self.version) - 1:
            return self.version + 1
        return self.version


def _indexed_files(table_path: str, version: int) -> int:
    """How many files Delta's streaming source numbers in ``version``: its change data files
    when it has any (what a change feed read reads), else the files it adds and removes."""
    commit = read_commit(table_path, version)
    return len(commit.changes) if commit.changes else len(commit.added) + len(commit.removed)


def delta_source_end(offsets: BatchOffsets) -> DeltaSourcePosition | None:
    """Where a batch's Delta source ended, from the offsets Spark logged for the batch; None
    when the query streams no Delta table."""
    return next((p for p in map(DeltaSourcePosition.parse, offsets.sources) if p is not None), None)


def tables_by_id(root: Path | str | None, table_id: Callable[[str], str | None]) -> dict[str, str]:
    """The tables under the lakehouse ``root``, by their Delta table id."""
    if root is None:
        return {}
    found = {}
    root = Path(root)
    for name in discover_tables(root):
        layer, table = name.split(".", 1)
        path = str(root / (SYSTEM_DIR if layer == SYSTEM_LAYER else layer) / table)
        identity = table_id(path)
        if identity is not None:
            found[identity] = path
    return found


__all__ = ["DeltaSourcePosition", "delta_source_end", "tables_by_id"]
