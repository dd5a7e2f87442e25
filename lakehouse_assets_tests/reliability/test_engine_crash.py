"""The Spark Connect engine SIGKILLed under a run: the run fails by itself and names the engine,
`lakehouse engine start` brings the engine back, and the next run makes every table whole,
nothing lost or duplicated.

The harness starts an engine of its own for its lakehouse; its runs are child processes
attached to it, so this runs in the embedded pass of ``make test`` too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_assets_tests.ports import free_port
from lakehouse_assets_tests.reliability.crash_harness import ENGINE_KILL, ENGINE_LOST_MESSAGE, CrashHarness

pytestmark = pytest.mark.slow



@pytest.mark.parametrize("table", ["silver.recordings_enriched"])
def test_an_engine_killed_mid_query_fails_the_run_by_name_and_the_next_run_is_whole(tmp_path: Path, table: str) -> None:
    harness = CrashHarness(tmp_path, seed=18, engine_port=free_port(), log=print)
    harness.start_engine()
    try:
        harness.land_some(files=3)

        killed = harness.run_child(ENGINE_KILL, kill_on_line=f"Running the availableNow query of {table}")

        assert killed.engine_killed, f"the run ended before its {table} query started (log {killed.log})"
        assert killed.returncode == 1, f"the run did not fail by itself (exit {killed.returncode}, log {killed.log})"
        assert ENGINE_LOST_MESSAGE in Path(killed.log).read_text(errors="replace")
        assert harness.summary.engine_restart_seconds, "the engine was not started again"
        assert harness.check("the engine kill", pending_ok=True).ok, harness.summary.failures()

        report = harness.clean_run("the run after the engine came back")
        assert report.ok, report.summary()
        assert harness.summary.ok, harness.summary.failures()
    finally:
        harness.stop_engine()
