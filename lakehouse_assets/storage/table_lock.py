"""One writer per table at a time: an exclusive lock per table, held while it is written.

Two runs of one table would run two streaming queries on one checkpoint, and on object storage
two Delta commits at once may both "succeed" (docs/guides/object-storage.md, which says how the
lock works there). A second run waits, up to a time limit, then fails naming the table and the
run holding it. The lock is ``<root>/_locks/<layer>.<name>.lock``: on a local disk, ``flock`` on
that file (the kernel releases it when its holder dies); on object storage, the object itself,
created with ``If-None-Match: *`` and renewed with ``If-Match`` every third of its lease.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

from lakehouse_assets.errors import TableBusyError
from lakehouse_assets.location import Location

LOCKS_DIR = "_locks"
#: How long a lock on object storage outlives its holder's last renewal.
LEASE_SECONDS = 30.0
# How often a waiting writer tries again: short enough not to add much to a wait; on object
# storage each try is a request or two.
_POLL_SECONDS = 0.2
_STORE_POLL_SECONDS = 1.0


def lock_location(root: Location, table_name: str) -> Location:
    """The lock of ``layer.name`` under the lakehouse root."""
    return root / LOCKS_DIR / f"{table_name}.lock"


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
def table_lock(
    root: Location, table_name: str, *, timeout_seconds: float, holder: str = "",
    lease_seconds: float = LEASE_SECONDS,
) -> Iterator[None]:
    """Hold the write lock of one table; see :func:`table_locks`. ``lease_seconds`` is how long
    a lock on object storage outlives a holder that stopped renewing it."""
    lock = lock_location(root, table_name)
    if lock.is_local:
        with _kernel_lock(lock, table_name, timeout_seconds, holder):
            yield
    else:
        with _leased_lock(lock, table_name, timeout_seconds, holder, lease_seconds):
            yield


@contextmanager
def _kernel_lock(lock: Location, table_name: str, timeout_seconds: float, holder: str) -> Iterator[None]:
    path = lock.local("A table's lock")
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
                    raise _busy(table_name, lock, timeout_seconds) from None
                time.sleep(_POLL_SECONDS)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_record(holder)).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def _leased_lock(lock: Location, table_name: str, timeout_seconds: float, holder: str,
                 lease_seconds: float) -> Iterator[None]:
    record = _record(holder, lease_seconds=lease_seconds)
    deadline = time.monotonic() + max(timeout_seconds, 0.0)
    seen: tuple[str, float, float] | None = None  # the holder's version, since when, its lease
    while (version := lock.create_text(json.dumps(record))) is None:
        current, now = lock.version(), time.monotonic()
        if current is None:
            continue  # released between the two requests: create it again
        if seen is None or seen[0] != current:
            seen = (current, now, _recorded_lease(lock))
        elif now - seen[1] >= seen[2]:
            # Unchanged for a whole lease: its holder stopped renewing it. Take over exactly that
            # version; of two waiters doing so, one wins.
            if (version := lock.replace_text(json.dumps(record), version=current)) is not None:
                break
        if now >= deadline:
            raise _busy(table_name, lock, timeout_seconds)
        time.sleep(min(_STORE_POLL_SECONDS, lease_seconds / 3))
    lease = _Lease(lock, record, version, lease_seconds)
    lease.start()
    try:
        yield
    finally:
        lease.stop()
        if lease.version == lock.version():
            lock.remove()
    if lease.lost:
        raise TableBusyError(
            f"Table {table_name}'s lock ({lock}) was taken over by another run while this one wrote "
            f"it: it could not be renewed for {lease_seconds:g} s. The two runs may have committed "
            "at once: run `lakehouse verify` before writing the table again.")


class _Lease(threading.Thread):
    """Renews a lock on object storage every third of its lease, until stopped or until the
    lock is found taken over."""

    def __init__(self, lock: Location, record: dict[str, object], version: str, lease_seconds: float) -> None:
        super().__init__(name=f"lease {lock.name}", daemon=True)
        self.lock, self.record, self.version, self.lease_seconds = lock, record, version, lease_seconds
        self.lost = False
        self._stopped = threading.Event()

    def run(self) -> None:
        renewals = 0
        while not self._stopped.wait(self.lease_seconds / 3):
            renewals += 1  # the content changes, so its version does
            try:
                renewed = self.lock.replace_text(json.dumps({**self.record, "renewals": renewals}),
                                                 version=self.version)
            except OSError:
                continue  # the store did not answer: try again, while the lease lasts
            if renewed is None:
                self.lost = True
                return
            self.version = renewed

    def stop(self) -> None:
        self._stopped.set()
        self.join()


def _record(holder: str, **extra: object) -> dict[str, object]:
    # Who holds the lock, for the error a waiting run reports.
    return {"pid": os.getpid(), "host": socket.gethostname(), "holder": holder,
            "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), **extra}


def _read_record(lock: Location) -> dict[str, object]:
    try:
        record = json.loads(lock.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _recorded_lease(lock: Location) -> float:
    lease = _read_record(lock).get("lease_seconds")
    return float(lease) if isinstance(lease, int | float) else LEASE_SECONDS


def _busy(table_name: str, lock: Location, timeout_seconds: float) -> TableBusyError:
    return TableBusyError(
        f"Table {table_name} is being written by another run ({describe_holder(lock)}); waited "
        f"{timeout_seconds:g} s for it to finish. Run again when it has finished; if no such run "
        f"exists any more, its lock ({lock}) is free already and the next run takes it"
        + ("." if lock.is_local else " once its lease has passed."))


def describe_holder(lock: Location) -> str:
    """Who holds the lock ``lock``, as its holder recorded it."""
    record = _read_record(lock)
    if not record:
        return "holder unknown"
    who = f"process {record.get('pid')} on {record.get('host')}"
    if record.get("holder"):
        who = f"{record['holder']}, {who}"
    return f"{who}, since {record.get('since')}"


__all__ = ["LEASE_SECONDS", "LOCKS_DIR", "describe_holder", "lock_location", "table_lock", "table_locks"]
