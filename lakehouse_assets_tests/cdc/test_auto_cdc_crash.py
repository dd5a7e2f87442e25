"""AUTO CDC under real crashes: runs of the reference change flow killed (SIGKILL of the whole
process group, Spark's JVM included) mid-merge and between a table's commit and its state's;
the runs after them lose and repeat nothing, against an independent computation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from lakehouse_assets.faults import ENV_VAR as FAULT_ENV_VAR
from lakehouse_assets.simulator import land_patient_changes
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialize

from . import reference
from .test_reference_flow import FLOW, _landed

CHILD_TIMEOUT_SECONDS = 600


def _killed_run(settings, fault: str) -> None:
    """Run the flow in a child process group that SIGKILLs itself at ``fault``."""
    env = {**os.environ, "LAKEHOUSE_ROOT": str(settings.root), FAULT_ENV_VAR: fault}
    env.pop("PYTEST_CURRENT_TEST", None)
    child = subprocess.run([sys.executable, "-m", "lakehouse_assets_tests.reliability.crash_child", *FLOW],
                           env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_SECONDS,
                           start_new_session=True)
    assert child.returncode == -signal.SIGKILL, f"the run was not killed at {fault}: {child.stderr[-2000:]}"


@pytest.mark.slow
def test_runs_killed_mid_merge_and_between_table_and_state_lose_and_repeat_nothing(spark, settings) -> None:
    landing = settings.root / "landing"
    land_patient_changes(landing, files=2, changes_per_file=30, seed=9)
    # Bronze writes its files first (hit 1); the first AUTO CDC table's merge writes next (hit 2),
    # and is killed before its commit.
    _killed_run(settings, "delta.files_written:2")
    # Bronze is done now; the first AUTO CDC table commits, and dies before its state does.
    _killed_run(settings, "cdc.table_committed:1")
    materialize(FLOW)
    land_patient_changes(landing, files=2, changes_per_file=30, seed=9)
    materialize(FLOW)

    changes = _landed(landing)
    bronze = delta_rows(settings, "bronze", "patient_changes", ["mrn", "seq"])
    assert bronze == sorted((c["mrn"], c["seq"]) for c in changes), "every landed change in bronze, once"
    current = delta_rows(settings, "silver", "patients_current", ["mrn", "name"])
    assert current == sorted(tuple(r.values()) for r in reference.scd1(changes, columns=["name"]))
    history = delta_rows(settings, "silver", "patients_history", ["mrn", "name", "__START_AT", "__END_AT"])
    assert history == sorted(tuple(r.values()) for r in reference.scd2(changes, tracked=["name"], columns=["name"]))
