"""On a shared Spark Connect engine, a run killed mid-query leaves nothing that harms the next.

Killing a run's process does not stop its streaming query: the query lives in the engine, in
the run's session, and goes on writing. The next run of the same table starts the query from
the same checkpoint, and Spark stops the orphan before the new run goes on
(``spark.sql.streaming.stopActiveRunOnRestart``); the sink's exactly-once commits make
whatever the orphan wrote in between count once. Runs in the Connect pass of ``make test``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets_tests.reliability.crash_harness import CrashHarness

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("LAKEHOUSE_SPARK_REMOTE"),
                       reason="needs a Spark Connect engine: the Connect pass of make test"),
]


@pytest.mark.parametrize("table", ["bronze.recordings", "silver.recordings_enriched"])
def test_a_run_killed_mid_query_is_followed_by_a_whole_run(tmp_path: Path, table: str) -> None:
    harness = CrashHarness(tmp_path, seed=15)
    harness.land_some(files=4)

    # The tables, not their checks: the checks read what the tables hold and have tests of their own.
    killed = harness.run_child("random", kill_on_line=f"Running the availableNow query of {table}", checks=False)
    assert killed.killed, f"the run ended before its {table} query started (log {killed.log})"

    report = harness.clean_run("the run after the kill", checks=False)
    assert report.ok, report.summary()
    assert not harness.summary.failed_runs, harness.summary.failed_runs

    # Nothing of the killed run goes on writing once the next run is done.
    store = DeltaTableStore()
    layer, name = table.split(".")
    path = str(Path(harness.settings.table_path(layer, name)))
    version = store.version(path)
    time.sleep(5)
    assert store.version(path) == version
