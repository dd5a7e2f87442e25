"""Exactly-once under a crash, for tables declared as a user declares them: a package of its own
(admissions: a CSV source, a SQL silver table with DROP ROW, a Python gold) and a Lakeflow
pipeline loaded through LAKEHOUSE_PIPELINES. Each gets a real SIGKILL where its declaration
differs most (the routed silver, between its quarantine's commit and its table's), the run
after it recovers, and verify's invariants hold for the tables it declares. In ``make test-all``
(marker ``campaign``), with their longer campaigns (``test_crash_campaigns.py``): they kill the
same sink the reference pipeline's routed silver is killed in by ``test_crash_recovery.py``, which
``make test`` runs, and two more children with their JVMs did not fit its budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_assets.definitions import project_definitions
from lakehouse_assets.reliability import InvariantReport
from lakehouse_assets.reliability.invariants import GOLD_RECOMPUTED, LANDED_ONCE, ROUTED
from lakehouse_assets_tests.admissions_data import land_admissions
from lakehouse_assets_tests.assets.pipeline import materialize
from lakehouse_assets_tests.built import BuiltLakehouse
from lakehouse_assets_tests.reliability.crash_harness import RECORDINGS, CampaignSource, CrashHarness, RunOutcome

pytestmark = pytest.mark.campaign

#: The admissions package as a user would add it, run alone and checked by its declarations.
ADMISSIONS = CampaignSource(
    land=lambda landing, files, seed: land_admissions(landing / "admissions", files=files, seed=seed),
    assets=("bronze/admissions", "silver/admissions_clean", "silver/admissions_clean_quarantine", "gold/ward_stays",
            "gold/ward_days"),
    packages=("lakehouse_assets_tests.admissions",),
)
#: The reference pipeline as Lakeflow Python, loaded through LAKEHOUSE_PIPELINES: an Auto Loader
#: bronze, a silver whose expect_or_drop expectations route rows into its quarantine, and
#: materialized views; fed by the reference recordings and patients.
LAKEFLOW = CampaignSource(
    land=RECORDINGS.land,
    assets=tuple(f"default/{name}" for name in ("patients", "recordings_bronze", "device_counts", "recordings_enriched",
                                                "recordings_enriched_quarantine", "daily_patient_avg")),
    pipelines=(Path(__file__).resolve().parents[2] / "examples" / "reference_lakeflow_python",),
)


def killed_in(harness: CrashHarness, step: str, outcome: RunOutcome) -> None:
    """The run died in ``step``, and what must hold at any moment holds."""
    assert outcome.killed and outcome.last_step == step, outcome
    report = harness.check(f"a kill in {step}", pending_ok=True)
    assert report.ok, report.summary()


def recover(harness: CrashHarness, monkeypatch: pytest.MonkeyPatch) -> InvariantReport:
    """The run after the kill, in this process, over the source's tables; then every invariant."""
    for key, value in harness.source.environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(harness.root))
    materialize(list(harness.source.assets), definitions=project_definitions(harness.settings))
    report = harness.check("the run after the kill", pending_ok=False)
    assert report.ok, report.summary()
    return report


@pytest.mark.slow
def test_a_run_of_a_second_source_killed_in_its_sql_silver_loses_and_repeats_nothing(spark, tmp_path, monkeypatch):
    harness = CrashHarness(tmp_path, seed=3, log=print, source=ADMISSIONS)
    harness.land_some(files=2)

    # Bronze goes through Delta's own sink; the routed SQL silver's first commit is its quarantine's.
    killed_in(harness, "silver__admissions_clean", harness.run_child("delta.committed", hit=1))
    harness.land_some(files=1)

    report = recover(harness, monkeypatch)

    assert "bronze.admissions" in report.result(LANDED_ONCE).checked
    assert "silver.admissions_clean" in report.result(ROUTED).checked
    assert "gold.ward_days" in report.result(GOLD_RECOMPUTED).checked


@pytest.mark.slow
def test_a_run_of_a_lakeflow_pipeline_killed_in_its_routed_silver_replays_exactly_once(built: BuiltLakehouse,
                                                                                       monkeypatch):
    """The pipeline's tables over the reference lakehouse's landed files: its steps go patients
    (a view: commit 1), recordings_bronze (Auto Loader, Delta's own sink: no fault point),
    recordings_enriched (two writes a batch, its quarantine's first: commit 2)."""
    harness = CrashHarness(built.root.parent, seed=7, log=print, source=LAKEFLOW)
    steps = ("default/patients", "default/recordings_bronze", "default/recordings_enriched",
             "default/recordings_enriched_quarantine")

    killed_in(harness, "default__recordings_enriched", harness.run_child("delta.committed", hit=2, assets=steps))
    built.land_recordings(files=1)

    report = recover(harness, monkeypatch)

    assert "default.recordings_bronze" in report.result(LANDED_ONCE).checked
    assert "default.recordings_enriched" in report.result(ROUTED).checked
