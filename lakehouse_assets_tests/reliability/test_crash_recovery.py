"""Crash injection: runs of the whole graph SIGKILLed at every fault point and at random moments.

Each test starts real child processes (a JVM each), so the campaign's size is a budget: see
KILLS. ``LAKEHOUSE_CRASH_SEED`` repeats a campaign's schedule, ``LAKEHOUSE_CRASH_KILLS``
changes its size; ``make soak`` runs a long one.
"""

from __future__ import annotations

import os
import sys

import pytest

from lakehouse_assets_tests.reliability.crash_harness import (
    KINDS,
    SEED_ENV_VAR,
    CrashHarness,
    crash_seed,
    format_summary,
)

KILLS_ENV_VAR = "LAKEHOUSE_CRASH_KILLS"
# A kill costs a child's start (Python, Dagster, a JVM) and its run up to the kill: about
# 20-30 s on a 2-core machine. 5 kills (every kind once) and the clean runs take about 2.5
# minutes there; `make soak` runs the long campaigns, on an engine too.
KILLS = len(KINDS)


def _announce(line: str) -> None:
    # Straight to the terminal, past pytest's capture: the seed must be seen even when the
    # test passes, so a campaign that found something can be repeated.
    print(line, file=sys.__stderr__, flush=True)


@pytest.mark.slow
def test_runs_killed_at_every_point_lose_and_duplicate_nothing(tmp_path):
    seed = crash_seed()
    kills = int(os.environ.get(KILLS_ENV_VAR) or KILLS)
    _announce(f"\ncrash campaign: {kills} kills, seed {seed} ({SEED_ENV_VAR}={seed} repeats it)")
    harness = CrashHarness(tmp_path, seed, clean_every=5, log=print)

    summary = harness.campaign(kills)

    _announce(format_summary(summary))
    assert summary.ok, summary.failures()
    assert summary.kills == kills, f"only {summary.kills} of {kills} runs could be killed (seed {seed})"
    if kills >= len(KINDS):
        assert set(summary.kills_by_point) == set(KINDS), f"seed {seed}: {dict(summary.kills_by_point)}"


@pytest.mark.slow
def test_a_run_killed_between_a_stateful_commit_and_its_checkpoint_recovers_on_the_next_run(tmp_path):
    """gold.daily_patient_avg (complete mode, with aggregation state) committed batch 0 to Delta,
    then the run died before Spark recorded the batch: the next run replays batch 0."""
    harness = CrashHarness(tmp_path, seed=7, log=print)
    harness.land_some(files=2)
    # delta.committed is reached by bronze, patients, device_counts, quarantine, silver, daily.
    killed = harness.run_child("delta.committed", hit=6)
    assert killed.killed and killed.last_step == "gold__daily_patient_avg", killed

    assert harness.check("the kill", pending_ok=True).ok, harness.summary.failures()
    harness.clean_run("the rerun")

    assert harness.summary.ok, harness.summary.failures()
