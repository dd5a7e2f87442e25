"""Crash campaigns over sources declared as a user declares them: a package of its own
(admissions) and a Lakeflow pipeline loaded through LAKEHOUSE_PIPELINES, each checked by its
declarations. (The reference graph's campaigns are in ``test_crash_recovery.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_assets.reliability import check_all
from lakehouse_assets.reliability.invariants import GOLD_RECOMPUTED, LANDED_ONCE, ROUTED
from lakehouse_assets_tests.admissions_data import land_admissions
from lakehouse_assets_tests.reliability.crash_harness import (
    FILE_KILL,
    RECORDINGS,
    SEED_ENV_VAR,
    CampaignSource,
    CrashHarness,
    RunOutcome,
    announce,
    crash_seed,
    format_summary,
)

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
    announce(f"\ncrash campaign over admissions: {kills} kills, seed {seed} ({SEED_ENV_VAR}={seed} repeats it)")
    harness = CrashHarness(tmp_path, seed, clean_every=5, log=print, source=ADMISSIONS)

    summary = harness.campaign(kills)

    announce(format_summary(summary))
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
