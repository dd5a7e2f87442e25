"""A table's write lock keeps writers one at a time, on a local disk (the kernel's lock) and on
a real S3-API server (a lock object created and renewed with conditional writes, on a lease)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from lakehouse_assets.errors import TableBusyError
from lakehouse_assets.location import locate
from lakehouse_assets.storage.table_lock import lock_location, table_lock
from lakehouse_assets_tests.storage.conftest import Folder

TABLE = "bronze.recordings"


def test_writers_of_one_table_take_turns(folder: Folder) -> None:
    root = locate(folder(""))
    inside = threading.Semaphore(2)
    overlaps: list[bool] = []

    def write(holder: str) -> None:
        with table_lock(root, TABLE, timeout_seconds=30, holder=holder, lease_seconds=3):
            inside.acquire()
            overlaps.append(inside._value == 0)  # another writer is inside too
            time.sleep(0.5)
            inside.release()

    with ThreadPoolExecutor(3) as pool:
        for done in [pool.submit(write, f"writer {n}") for n in range(3)]:
            done.result()
    assert overlaps == [False, False, False]
    # The lock is given back: the next writer takes it at once.
    with table_lock(root, TABLE, timeout_seconds=0):
        pass


def test_a_writer_that_cannot_get_the_table_in_time_is_told_who_holds_it(folder: Folder) -> None:
    root = locate(folder(""))
    with table_lock(root, TABLE, timeout_seconds=0, holder="run 42 of bronze"):
        started = time.monotonic()
        with pytest.raises(TableBusyError, match=r"Table bronze\.recordings is being written by another run "
                                                 r"\(run 42 of bronze, process \d+ on .*waited 0\.5 s"):
            with table_lock(root, TABLE, timeout_seconds=0.5):
                pass
        assert time.monotonic() - started >= 0.5


def test_a_lock_on_the_store_whose_holder_died_is_taken_over_once_its_lease_has_passed(store_folder: Folder) -> None:
    root = locate(store_folder(""))
    # A holder that took the lock and died: nothing renews it.
    lock_location(root, TABLE).create_text(json.dumps({"holder": "a run that died", "lease_seconds": 1.5}))
    with pytest.raises(TableBusyError, match="a run that died"):
        with table_lock(root, TABLE, timeout_seconds=0.5):
            pass
    started = time.monotonic()
    with table_lock(root, TABLE, timeout_seconds=10, lease_seconds=3, holder="the next run"):
        assert "the next run" in lock_location(root, TABLE).read_text()
    assert time.monotonic() - started >= 1.5
    assert not lock_location(root, TABLE).exists()


def test_a_holder_on_the_store_keeps_its_lock_past_its_lease_by_renewing_it(store_folder: Folder) -> None:
    root = locate(store_folder(""))
    with table_lock(root, TABLE, timeout_seconds=0, lease_seconds=1.0, holder="a long write"):
        with pytest.raises(TableBusyError, match="a long write"):
            with table_lock(root, TABLE, timeout_seconds=3, lease_seconds=1.0):
                pass
        assert json.loads(lock_location(root, TABLE).read_text())["renewals"] >= 3


def test_a_holder_on_the_store_whose_lock_was_taken_over_says_so_when_it_ends(store_folder: Folder) -> None:
    root = locate(store_folder(""))
    lock = lock_location(root, TABLE)
    with pytest.raises(TableBusyError, match=r"taken over by another run while this one wrote it.*lakehouse verify"):
        with table_lock(root, TABLE, timeout_seconds=0, lease_seconds=0.6):
            lock.write_text(json.dumps({"holder": "another run"}))  # as a waiter's takeover does
            time.sleep(0.6)
    # The other run's lock is left to it.
    assert "another run" in lock.read_text()
