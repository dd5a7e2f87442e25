"""Crash injection: runs of the whole graph SIGKILLed at every fault point and at random moments
(the campaigns over sources declared elsewhere, a package and a pipeline, are in
``test_crash_recovery_declared.py``, so that the two test workers share the campaigns).

Each test starts real child processes (a JVM each), so the campaign's size is a budget: see
KILLS. ``LAKEHOUSE_CRASH_SEED`` repeats a campaign's schedule, ``LAKEHOUSE_CRASH_KILLS``
changes its size; ``make soak`` runs a long one.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest
from deltalake import DeltaTable

from lakehouse_assets.storage._files import locate
from lakehouse_assets.storage.checkpoint import batch_ids
from lakehouse_assets_tests.reliability.crash_harness import (
    KINDS,
    SEED_ENV_VAR,
    CrashHarness,
    announce,
    crash_seed,
    format_summary,
)

KILLS_ENV_VAR = "LAKEHOUSE_CRASH_KILLS"
# A kill costs a child's start (Python, Dagster, a JVM) and its run up to the kill: about
# 20-30 s on a 2-core machine. 5 kills (every kind once) and the clean runs take about 2.5
# minutes there; `make soak` runs the long campaigns, on an engine too.
KILLS = len(KINDS)


@pytest.mark.slow
def test_runs_killed_at_every_point_lose_and_duplicate_nothing(tmp_path):
    seed = crash_seed()
    kills = int(os.environ.get(KILLS_ENV_VAR) or KILLS)
    announce(f"\ncrash campaign: {kills} kills, seed {seed} ({SEED_ENV_VAR}={seed} repeats it)")
    harness = CrashHarness(tmp_path, seed, clean_every=5, log=print)

    summary = harness.campaign(kills)

    announce(format_summary(summary))
    assert summary.ok, summary.failures()
    assert summary.kills == kills, f"only {summary.kills} of {kills} runs could be killed (seed {seed})"
    if kills >= len(KINDS):
        assert set(summary.kills_by_point) == set(KINDS), f"seed {seed}: {dict(summary.kills_by_point)}"


@pytest.mark.slow
def test_a_run_killed_between_an_incremental_gold_table_and_its_state_recovers_on_the_next_run(tmp_path):
    """gold.daily_patient_avg (kept incrementally) committed its batch, then the run died before
    the batch's partial results reached its state: the next run commits the state, and gold
    equals its recomputation from silver."""
    harness = CrashHarness(tmp_path, seed=7, log=print)
    harness.land_some(files=2)
    # aggregate.table_committed is reached by gold.device_counts, then gold.daily_patient_avg.
    killed = harness.run_child("aggregate.table_committed", hit=2)
    assert killed.killed and killed.last_step == "gold__daily_patient_avg", killed

    assert harness.check("the kill", pending_ok=True).ok, harness.summary.failures()
    harness.clean_run("the rerun")

    assert harness.summary.ok, harness.summary.failures()


@pytest.mark.slow
def test_a_stateful_query_that_died_between_its_commit_and_its_checkpoint_writes_each_window_once(tmp_path):
    """gold.heartrate_5min (windows, a watermark: state in Spark's state store) is appended
    by Delta's own sink, which no fault point reaches: the crash is left as a kill there
    leaves it, the batch committed to Delta and not recorded as done in the checkpoint. The
    next run replays it from the state as it was, Delta skips it, and no window is written
    twice or lost."""
    harness = CrashHarness(tmp_path, seed=7, log=print)
    harness.land_some(files=2)
    silver = ["bronze/recordings", "silver/patients", "silver/recordings_enriched", "silver/recordings_quarantine"]
    assert harness.run_child("clean", assets=silver).returncode == 0
    windows = ["gold/heartrate_5min"]
    assert harness.run_child("clean", assets=windows).returncode == 0
    table = str(harness.settings.table_path("gold", "heartrate_5min"))
    commits = DeltaTable(table).history()
    writing = max(int(c["operationParameters"]["epochId"]) for c in commits
                  if c["operation"] == "STREAMING UPDATE" and int(c["operationMetrics"].get("numOutputRows", 0)))
    checkpoint = harness.settings.checkpoint_path("gold", "heartrate_5min")
    for batch in range(writing, max(batch_ids(locate(str(checkpoint / "offsets")))) + 1):
        for folder, first in (("commits", writing), ("offsets", writing + 1)):
            if batch >= first:
                for name in (str(batch), f".{batch}.crc"):
                    (checkpoint / folder / name).unlink(missing_ok=True)

    assert harness.run_child("clean", assets=windows).returncode == 0  # replays batch `writing`

    assert (checkpoint / "commits" / str(writing)).exists()
    replayed = [c for c in DeltaTable(table).history() if c["operation"] == "STREAMING UPDATE"
                and int(c["operationParameters"]["epochId"]) == writing]
    assert len(replayed) == 1, "Delta committed the replayed batch again"
    written = Counter((r["device_id"], r["window_start"]) for r in delta_rows(harness, "gold", "heartrate_5min"))
    assert written and max(written.values()) == 1, "a window was written twice"
    counted = sum(r["recordings"] for r in delta_rows(harness, "gold", "heartrate_5min"))
    silver_rows = len(delta_rows(harness, "silver", "recordings_enriched"))
    assert 0 < counted <= silver_rows  # windows still open (behind the watermark) are not written yet


def delta_rows(harness: CrashHarness, layer: str, name: str) -> list[dict[str, Any]]:
    return DeltaTable(str(harness.settings.table_path(layer, name))).to_pyarrow_table().to_pylist()
