"""The deployment helper's own shutdown check must be able to fail: a process that outlives
the interrupt is reported (and killed), not silently left behind. No Dagster here, so fast."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

from lakehouse_assets_tests.e2e.dagster_dev import DagsterDeployment, processes_in

# A parent that exits on Ctrl-C, and a child that ignores it (as a stuck run worker would).
_PARENT_WITH_STUBBORN_CHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-c",
        "import pathlib, signal, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "pathlib.Path(sys.argv[1]).touch(); time.sleep(600)", sys.argv[1]])
    time.sleep(600)
    """
)


def test_stop_reports_and_kills_a_process_that_ignores_the_interrupt(tmp_path: Path) -> None:
    deployment = DagsterDeployment(home=tmp_path / "home", root=tmp_path / "root", log_dir=tmp_path)
    ignoring = tmp_path / "child_ignores_sigint"
    deployment._start("stubborn", [sys.executable, "-c", _PARENT_WITH_STUBBORN_CHILD, str(ignoring)])
    group = deployment._started[0].popen.pid
    # Wait until the child ignores SIGINT, not merely exists: on a loaded machine an interrupt
    # sent in between would end it like any other process.
    deadline = time.monotonic() + 30
    while not ignoring.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(processes_in([group])) == 2 and ignoring.exists(), "the parent did not start its child"

    report = deployment.stop(timeout=3)

    assert report.exit_codes["stubborn"] is not None, "the parent should exit on SIGINT"
    assert [p.cmdline for p in report.leftovers] and "SIG_IGN" in report.leftovers[0].cmdline, report.describe()
    assert not report.clean
    deadline = time.monotonic() + 10
    while processes_in([group]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_in([group]), "stop() must kill what it reports as left over"
