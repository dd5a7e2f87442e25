"""The engine's reaper ends idle planner daemons and nothing else: tried on real processes that
look like PySpark's (no Spark needed); on a real engine in test_server.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakehouse_assets.engine.files import ENGINE_MARKER
from lakehouse_assets.engine.reaper import ProcessInfo, Reaper, planner_daemon_load

PLANNER = "pyspark.sql.worker.plan_data_source_read"
IDLE = "import time; time.sleep(600)"
BUSY = "import time\nwhile True: sum(range(10000))"


def test_a_planner_daemon_is_charged_with_its_workers_cpu() -> None:
    table = [
        ProcessInfo(10, 1, ("python", "-m", "pyspark.daemon", PLANNER), 1.0),
        ProcessInfo(11, 10, ("python", "-m", "pyspark.daemon", PLANNER), 0.5),  # a forked worker
        ProcessInfo(20, 1, ("python", "-m", "pyspark.daemon", "pyspark.worker"), 3.0),  # runs tasks
        ProcessInfo(30, 1, ("python", "-m", "pyspark.sql.worker.plan_data_source_read"), 0.0),  # not a daemon
        ProcessInfo(40, 1, ("java", "SparkConnectServer"), 9.0),
    ]
    assert planner_daemon_load(table) == {10: 1.5}


@pytest.fixture
def engine_folder(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "_engine"
    folder.mkdir()
    yield folder


def _start(folder: Path | None, code: str, *modules: str) -> subprocess.Popen:
    """A process whose command line reads like PySpark's daemon of ``modules``."""
    env = dict(os.environ)
    if folder is not None:
        env[ENGINE_MARKER] = str(folder)
    return subprocess.Popen([sys.executable, "-c", code, "-m", *modules], env=env)


def test_only_idle_planner_daemons_of_this_engine_are_ended(engine_folder: Path, tmp_path: Path) -> None:
    idle_planner = _start(engine_folder, IDLE, "pyspark.daemon", PLANNER)
    busy_planner = _start(engine_folder, BUSY, "pyspark.daemon", PLANNER)
    task_daemon = _start(engine_folder, IDLE, "pyspark.daemon", "pyspark.worker")
    other_engines = _start(tmp_path / "elsewhere", IDLE, "pyspark.daemon", PLANNER)
    everyone = [idle_planner, busy_planner, task_daemon, other_engines]
    try:
        reaper = Reaper(engine_folder, idle_seconds=2)
        time.sleep(0.5)  # all four have started
        assert reaper.sweep() == []  # first look: nothing has been idle long enough
        time.sleep(2.5)
        assert reaper.sweep() == [idle_planner.pid]
        assert idle_planner.wait(timeout=10) == -15  # SIGTERM
        assert busy_planner.poll() is None and task_daemon.poll() is None and other_engines.poll() is None
    finally:
        for process in everyone:
            process.kill()
            process.wait()
