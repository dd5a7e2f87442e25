"""Crash injection: runs of the whole graph SIGKILLed at every fault point and at random moments.

Each test starts real child processes (a JVM each), so the campaign's size is a budget: see
KILLS. ``LAKEHOUSE_CRASH_SEED`` repeats a campaign's schedule, ``LAKEHOUSE_CRASH_KILLS``
changes its size; ``make soak`` runs a long one.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from lakehouse_assets.reliability import check_all
from lakehouse_assets.reliability.invariants import GOLD_RECOMPUTED, LANDED_ONCE, ROUTED
from lakehouse_assets.storage._files import locate
from lakehouse_assets.storage.checkpoint import batch_ids
from lakehouse_assets_tests.admissions_data import land_admissions
from lakehouse_assets_tests.reliability.crash_harness import (
    FILE_KILL,
    KINDS,
    RECORDINGS,
    SEED_ENV_VAR,
    CampaignSource,
    CrashHarness,
    RunOutcome,
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


#: The admissions package (a CSV source, a SQL silver table with DROP ROW, a Python gold) as
#: a user would add it: the campaign runs its tables alone and checks them by their declarations.
ADMISSIONS = CampaignSource(
    land=lambda landing, files, seed: land_admissions(landing / "admissions", files=files, seed=seed),
    assets=("bronze/admissions", "silver/admissions_clean", "silver/admissions_clean_quarantine", "gold/ward_stays",
            "gold/ward_days"),
    packages=("lakehouse_assets_tests.admissions",),
)


@pytest.mark.slow
def test_runs_killed_over_a_second_source_lose_and_duplicate_nothing(tmp_path):
    seed = crash_seed()
    kills = 3
    _announce(f"\ncrash campaign over admissions: {kills} kills, seed {seed} ({SEED_ENV_VAR}={seed} repeats it)")
    harness = CrashHarness(tmp_path, seed, clean_every=5, log=print, source=ADMISSIONS)

    summary = harness.campaign(kills)

    _announce(format_summary(summary))
    assert summary.ok, summary.failures()
    assert summary.kills == kills, f"only {summary.kills} of {kills} runs could be killed (seed {seed})"
    report = check_all(harness.settings)
    assert "bronze.admissions" in report.result(LANDED_ONCE).checked
    assert "silver.admissions_clean" in report.result(ROUTED).checked
    assert "gold.ward_days" in report.result(GOLD_RECOMPUTED).checked


#: The reference pipeline as Lakeflow Python, loaded through LAKEHOUSE_PIPELINES in every run:
#: an Auto Loader bronze, a silver whose expect_or_drop expectations route rows into its
#: quarantine, and materialized views; fed by the reference recordings and patients.
LAKEFLOW = CampaignSource(
    land=RECORDINGS.land,
    assets=tuple(f"default/{name}" for name in ("patients", "recordings_bronze", "device_counts", "recordings_enriched",
                                                "recordings_enriched_quarantine", "daily_patient_avg")),
    pipelines=(Path(__file__).resolve().parents[2] / "examples" / "reference_lakeflow_python",),
)


@pytest.mark.slow
def test_runs_of_a_lakeflow_pipeline_killed_in_its_bronze_silver_and_view_replay_exactly_once(tmp_path):
    """A run's steps go patients, recordings_bronze, device_counts, recordings_enriched (two
    writes a batch: the quarantine's and its own), daily_patient_avg; each kill is checked to
    have hit the step it aims at, and the invariants of the tables the pipeline declares to
    hold at any moment; after a clean run, all of them."""
    harness = CrashHarness(tmp_path, seed=7, log=print, source=LAKEFLOW)

    def killed_in(step: str, outcome: RunOutcome) -> None:
        assert outcome.killed and outcome.last_step == step, outcome
        assert harness.check(f"a kill in {step}", pending_ok=True).ok, harness.summary.failures()

    harness.land_some(files=2)
    # Auto Loader writes through Delta's own streaming sink, which no fault point reaches: the
    # run dies as its first batch's offsets are logged, before (or while) the batch commits.
    offsets = harness.settings.checkpoint_path("default", "recordings_bronze") / "offsets"
    killed_in("default__recordings_bronze", harness.run_child(FILE_KILL, kill_on_path=offsets / "0"))
    harness.land_some(files=1)
    # Commits 1 and 2 are the views patients and device_counts; 3 the first of the routed
    # silver's two tables for its batch: one of them holds the batch, the other not yet.
    killed_in("default__recordings_enriched", harness.run_child("delta.committed", hit=3))
    # Nothing new landed: bronze writes nothing, the silver's replay writes only the table the
    # kill left without the batch (3); the view daily_patient_avg dies with its files written
    # and its commit not made.
    killed_in("default__daily_patient_avg", harness.run_child("delta.files_written", hit=4))
    harness.land_some(files=1)
    report = harness.clean_run("the clean run after the kills")

    assert harness.summary.ok, harness.summary.failures()
    assert "default.recordings_bronze" in report.result(LANDED_ONCE).checked
    assert "default.recordings_enriched" in report.result(ROUTED).checked


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
