"""A table's log read newest first, only as far back as the reader goes.

Most questions asked of the log after a run (what did this run commit, what did the newest
batch read) are answered by its newest few
commits. :func:`newest_first` reads those first and the whole history only when the caller
keeps going past them, so the common case costs one short read however long the log is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from lakehouse_assets.storage.engine import HistoryEntry

if TYPE_CHECKING:
    from lakehouse_assets.storage.delta import DeltaTableStore

# Commits read before falling back to the whole history: more than one run's batches.
NEWEST_COMMITS = 32


def newest_first(store: DeltaTableStore, path: str) -> Iterator[HistoryEntry]:
    """The commits of the table at ``path``, newest first (none if there is no table);
    stop iterating as soon as the answer is known."""
    if not store.exists(path):
        return
    entries = store.history(path, limit=NEWEST_COMMITS)
    yield from entries
    if len(entries) < NEWEST_COMMITS:
        return
    oldest_seen = entries[-1].version
    yield from (entry for entry in store.history(path) if entry.version < oldest_seen)


__all__ = ["NEWEST_COMMITS", "newest_first"]
