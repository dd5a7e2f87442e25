"""Delta Lake's streaming source offsets, and the commit file of a version: where a query
reading a Delta table stands, from the offsets Delta logs in the query's checkpoint
(``offsets/N``, one JSON line per source; each batch's commit, ``sink.OFFSETS_KEY``, and the
event log record them too). With :mod:`~lakehouse_assets.checkpoints.logs`, the only
code that reads Spark's or Delta's own on-disk formats; an offset of a serialization version
not written for is refused by name.

Delta's offset is ``{"sourceVersion", "reservoirId", "reservoirVersion", "index",
"isStartingVersion"}``: the table's id, the version the source stands in, and the index of
the last file it read there (-1: none yet). Reading the snapshot a new query starts from,
``isStartingVersion`` is true; once a version is read whole, a plain read moves to its end
index (or the next version's index -1), a change feed read stays at its last file. Offsets
name the table by id, not by path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakehouse_assets.checkpoints.logs import BatchOffsets
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.location import locate

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
        name rather than misread; ``where`` says whose offset it is."""
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
        row of; None when it has read none whole (a snapshot read in part counts as nothing)."""
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


def is_pre_connector_offset(offset: Any) -> bool:
    """Whether a source's offset is the one the project's own Delta source logged, before
    Delta Lake's connector read the tables."""
    return (isinstance(offset, Mapping) and "tableId" in offset and "snapshot" in offset
            and "reservoirId" not in offset)


def delta_source_end(offsets: BatchOffsets) -> DeltaSourcePosition | None:
    """Where a batch's Delta source ended, from the offsets Spark logged for the batch; None
    when the query streams no Delta table."""
    return next((p for p in map(DeltaSourcePosition.parse, offsets.sources) if p is not None), None)


def _indexed_files(table_path: str, version: int) -> int:
    """How many files Delta's streaming source numbers in ``version``: its change data files
    when it has any (what a change feed read reads), else the data files it adds and removes.
    From the commit file itself: no snapshot lists change files."""
    text = (locate(table_path) / "_delta_log" / f"{version:020d}.json").read_text()
    changes = data_files = 0
    for line in filter(str.strip, text.splitlines()):
        action: dict[str, Any] = json.loads(line)
        if "cdc" in action:
            changes += 1
        for kind in ("add", "remove"):
            if kind in action and action[kind].get("dataChange", True):
                data_files += 1
    return changes or data_files
