"""Two runs writing one table at once, and readers beside a writer."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakehouse_assets.errors import TableBusyError
from lakehouse_assets.reliability.flows import project_flows
from lakehouse_assets.reliability.landed_once import check_landed_once
from lakehouse_assets.simulator import land
from lakehouse_assets.spec import IO_MANAGER_KEY, STREAM_INPUT_KEY
from lakehouse_assets.storage import AppTransaction
from lakehouse_assets.storage.table_lock import table_lock
from lakehouse_assets_tests.assets.pipeline import materialization_metadata, materialize
from lakehouse_assets_tests.reliability.test_checkpoint_repair import failure_text

LANDING_OPTIONS = dict(records_per_file=150, bad_rate=0.05, seed=37, files_per_year=365)


def lock_timeout(seconds: float) -> dict:
    config = {"config": {"lock_timeout_seconds": seconds}}
    return {"resources": {IO_MANAGER_KEY: config, STREAM_INPUT_KEY: config}}


@pytest.mark.slow
def test_two_materializations_of_one_asset_at_once_run_one_after_the_other(spark, settings):
    landed = land(settings.root / "landing", files=3, **LANDING_OPTIONS)
    start = threading.Barrier(2)

    def run():
        start.wait()
        return materialization_metadata(materialize("bronze/recordings"))

    with ThreadPoolExecutor(2) as pool:
        runs = [f.result() for f in [pool.submit(run), pool.submit(run)]]

    # One run read everything; the other waited for it and found nothing new: it committed
    # nothing. (Its query had been handed to the IO manager before the lock was free, so Dagster
    # records its materialization all the same, with no rows: no commit of its run.)
    committed = [r["bronze/recordings"] for r in runs if "rows_written" in r.get("bronze/recordings", {})]
    assert len(committed) == 1, runs
    assert committed[0]["rows_processed"] == landed.counts.total
    landed_once = check_landed_once(settings, project_flows())
    assert landed_once.ok, [str(v) for v in landed_once.violations]


@pytest.mark.slow
def test_a_run_that_cannot_get_the_table_fails_naming_it_and_its_holder(spark, settings):
    land(settings.root / "landing", files=1, **LANDING_OPTIONS)
    with table_lock(settings.root, "bronze.recordings", timeout_seconds=0, holder="a test holding bronze"):
        with pytest.raises(Exception) as info:
            materialize("bronze/recordings", run_config=lock_timeout(0.5))
    text = failure_text(info.value)
    assert TableBusyError.__name__ in text and "bronze.recordings" in text and "a test holding bronze" in text
    # Nothing was written, and the table can be written once the lock is free.
    assert not Path(settings.table_path("bronze", "recordings")).exists()
    materialize("bronze/recordings", run_config=lock_timeout(0.5))


def test_readers_beside_a_writer_always_see_whole_batches(spark, store, tmp_path):
    path, batch, batches = str(tmp_path / "t"), 50, 6
    store.write(spark.range(batch), path, transaction=AppTransaction("q", 0))
    done = threading.Event()
    seen: list[int] = []

    def write():
        try:
            for n in range(1, batches):
                store.write(spark.range(n * batch, (n + 1) * batch), path, transaction=AppTransaction("q", n))
        finally:
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    while not done.is_set():
        seen.append(DeltaTable(path).to_pyarrow_dataset().count_rows())
        seen.append(store.read(spark, path).count())
    writer.join()

    assert all(count % batch == 0 for count in seen), seen
    assert store.read(spark, path).count() == batch * batches
