"""One writer per table at a time: an exclusive lock file per table, held while it is written.

Two materializations of one asset started together would run two streaming queries on one
checkpoint: Spark does not stop the second (it only refuses two in one JVM), and both would
plan the same batch numbers. The IO manager takes this lock around a table's write (both
tables of a routed query); the second run waits for the first, up to a time limit, then
fails with an error that names the table and the run holding it.

The lock is ``flock`` on ``<root>/_locks/<layer>.<name>.lock``: the kernel releases it when
the holder's file is closed, so a process killed even by SIGKILL leaves no stale lock. It
holds between processes and between threads (each acquisition opens the file anew). Local
file systems only, like the checkpoints beside it.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from lakehouse_assets.errors import TableBusyError
from lakehouse_assets.location import Location

LOCKS_DIR = "_locks"
# How often a waiting writer tries again: short enough not to add much to a wait.
_POLL_SECONDS = 0.2


def lock_path(root: Location, table_name: str) -> Path:
    """The lock file of ``layer.name`` under the lakehouse root."""
    return root.local("Locking a table against other writers") / LOCKS_DIR / f"{table_name}.lock"


@contextmanager
def table_locks(
    root: Location, table_names: Sequence[str], *, timeout_seconds: float, holder: str = ""
) -> Iterator[None]:
    """Hold the write locks of ``table_names`` (taken in name order, so two runs that lock
    overlapping sets cannot deadlock). Waits up to ``timeout_seconds`` for each, then raises
    :class:`~lakehouse_assets.errors.TableBusyError` naming the table and its holder."""
    with ExitStack() as stack:
        for name in sorted(set(table_names)):
            stack.enter_context(table_lock(root, name, timeout_seconds=timeout_seconds, holder=holder))
        yield


@contextmanager
def table_lock(root: Location, table_name: str, *, timeout_seconds: float, holder: str = "") -> Iterator[None]:
    """Hold the write lock of one table; see :func:`table_locks`."""
    path = lock_path(root, table_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + max(timeout_seconds, 0.0)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TableBusyError(
                        f"Table {table_name} is being written by another run ({describe_holder(path)}); "
                        f"waited {timeout_seconds:g} s for it to finish. Run again when it has "
                        f"finished; if no such run exists any more, its lock ({path}) is free "
                        "already and the next run takes it."
                    ) from None
                time.sleep(_POLL_SECONDS)
        # Say who holds the lock, for the error a waiting run reports.
        record = {
            "pid": os.getpid(), "host": socket.gethostname(), "holder": holder,
            "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def describe_holder(path: Path) -> str:
    """Who holds the lock at ``path``, as its holder recorded it."""
    try:
        record = json.loads(Path(path).read_text() or "{}")
    except (OSError, ValueError):
        record = {}
    if not record:
        return "holder unknown"
    who = f"process {record.get('pid')} on {record.get('host')}"
    if record.get("holder"):
        who = f"{record['holder']}, {who}"
    return f"{who}, since {record.get('since')}"


__all__ = ["LOCKS_DIR", "describe_holder", "lock_path", "table_lock", "table_locks"]
