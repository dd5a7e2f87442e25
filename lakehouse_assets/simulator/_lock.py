"""Landers of one landing folder take turns: the tables' own lock
(:func:`~lakehouse_assets.storage.table_lock.table_lock`), kept as
``<landing_root>/_locks/<source>.lock`` (ingestion skips ``_`` folders).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from lakehouse_assets.errors import TableBusyError
from lakehouse_assets.location import Location
from lakehouse_assets.simulator.errors import LandingError
from lakehouse_assets.storage.table_lock import describe_holder, lock_location, table_lock

#: How long a lander waits for another one to finish. Landers hold the lock for one call of
#: land() (a continuous lander: one file); landing a whole year at once on a store takes
#: minutes, so a wait this long means a lander that hangs.
LOCK_TIMEOUT_SECONDS = 600.0


@contextmanager
def landing_lock(landing_root: Location, source: str, *,
                 timeout_seconds: float = LOCK_TIMEOUT_SECONDS) -> Iterator[None]:
    """Hold the lock of ``<landing_root>/<source>`` while landing into it; waits up to
    ``timeout_seconds`` for another lander, then raises :class:`LandingError` naming it."""
    lock = lock_location(landing_root, source)
    folder = landing_root / source
    landed = False
    try:
        with table_lock(landing_root, source, timeout_seconds=timeout_seconds,
                        holder=f"lander of {folder}"):
            yield
            landed = True
    except TableBusyError as exc:
        if landed:
            # The lease was lost while landing: another lander may have written too.
            raise LandingError(
                f"The lock of {folder} ({lock}) was taken over by another lander while this one "
                f"landed files: it could not be renewed in time. Both may have numbered files; "
                f"check {folder} and its manifest before landing again. ({exc})") from exc
        raise LandingError(
            f"Another lander is landing into {folder} ({describe_holder(lock)}); waited "
            f"{timeout_seconds:g} s for it. Land again when it has finished, or stop it; a "
            f"lander that died frees its lock ({lock})"
            + (" at once." if lock.is_local else " once its lease has passed.")) from exc
