"""The long crash campaigns, in ``make test-all`` (``make test`` stops a run once at every fault
point and kills one on every kind of write: ``test_crash_recovery.py``, whose kill at every
point is ``make test-all``'s; ``test_crash_recovery_declared.py``'s one kill per declared source
is ``make test-all``'s too).

Runs of the whole seeds' graph SIGKILLed again and again, at the fault points and at random
moments (which can fall anywhere, Spark writing its checkpoint or state files included);
campaigns of several kills over the sources declared elsewhere (a package, a Lakeflow
pipeline); a campaign with the lakehouse on S3-API object storage; AUTO CDC runs killed
mid-merge and between table and state. Each kill is a child
process with a JVM of its own; ``LAKEHOUSE_CRASH_SEED`` repeats a campaign's schedule,
``LAKEHOUSE_CRASH_KILLS`` changes the size of the every-point one; ``make soak`` runs a longer
one still, on an engine too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from lakehouse_assets.faults import ENV_VAR as FAULT_ENV_VAR
from lakehouse_assets.reliability import check_all
from lakehouse_assets.reliability.invariants import GOLD_RECOMPUTED, LANDED_ONCE, ROUTED
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.simulator import land_patient_changes
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialize
from lakehouse_assets_tests.cdc import reference
from lakehouse_assets_tests.cdc.test_reference_flow import FLOW, _landed
from lakehouse_assets_tests.reliability.crash_harness import (
    FILE_KILL,
    KINDS,
    SEED_ENV_VAR,
    CrashHarness,
    RunOutcome,
    announce,
    crash_seed,
    format_summary,
)
from lakehouse_assets_tests.reliability.test_crash_recovery_declared import ADMISSIONS, LAKEFLOW
from lakehouse_assets_tests.s3_server import S3Server

pytestmark = [pytest.mark.slow, pytest.mark.campaign]

KILLS_ENV_VAR = "LAKEHOUSE_CRASH_KILLS"
#: Every kind of kill twice: about 6 minutes on a 2-core machine.
KILLS = 2 * len(KINDS)
CHILD_TIMEOUT_SECONDS = 600


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


def test_runs_killed_at_every_point_with_the_root_on_object_storage_lose_and_duplicate_nothing(
        spark_on_s3: S3Server, tmp_path: Path) -> None:
    """One kill per kind of write with the lakehouse on the store (s3proxy on loopback): the
    runs, the landing and `lakehouse verify`'s invariants reach it as a user's environment
    says (the AWS variables); only the runs' logs and scratch stay on the local disk."""
    seed = crash_seed()
    kills = len(KINDS)
    announce(f"\ncrash campaign on object storage: {kills} kills, seed {seed} ({SEED_ENV_VAR}={seed} repeats it)")
    # The store, reached from this process's Spark too: lakehouse verify's gold check runs there.
    root = f"s3a://{spark_on_s3.bucket(f'crash-{uuid.uuid4().hex[:12]}')}/lakehouse"
    harness = CrashHarness(tmp_path, seed, clean_every=kills, log=print, root=root)

    summary = harness.campaign(kills)

    announce(format_summary(summary))
    assert summary.ok, summary.failures()
    assert summary.kills == kills, f"only {summary.kills} of {kills} runs could be killed (seed {seed})"
    assert set(summary.kills_by_point) == set(KINDS), f"seed {seed}: {dict(summary.kills_by_point)}"
    # Every table, checkpoint and landed file lies on the store; none of it on the local disk.
    assert {"_checkpoints", "bronze", "gold", "landing", "silver"} <= set(harness.location.folders())
    assert not (tmp_path / "lakehouse").exists() and not list(tmp_path.rglob("_delta_log"))


def test_runs_killed_over_a_second_source_lose_and_duplicate_nothing(tmp_path):
    seed = crash_seed()
    kills = 3
    announce(f"\ncrash campaign over admissions: {kills} kills, seed {seed} ({SEED_ENV_VAR}={seed} repeats it)")
    harness = CrashHarness(tmp_path, seed, clean_every=5, log=print, source=ADMISSIONS)

    summary = harness.campaign(kills)

    announce(format_summary(summary))
    assert summary.ok, summary.failures()
    assert summary.kills == kills, f"only {summary.kills} of {kills} runs could be killed (seed {seed})"
    report = check_all(LakehouseResource.from_settings(harness.settings))
    assert "bronze.admissions" in report.result(LANDED_ONCE).checked
    assert "silver.admissions_clean" in report.result(ROUTED).checked
    assert "gold.ward_days" in report.result(GOLD_RECOMPUTED).checked


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
    offsets = Path(harness.settings.checkpoint_path("default", "recordings_bronze")) / "offsets"
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


def _killed_run(settings, fault: str) -> None:
    """Run the flow in a child process group that SIGKILLs itself at ``fault``."""
    env = {**os.environ, "LAKEHOUSE_ROOT": str(settings.root), FAULT_ENV_VAR: fault}
    env.pop("PYTEST_CURRENT_TEST", None)
    child = subprocess.run([sys.executable, "-m", "lakehouse_assets_tests.reliability.crash_child", *FLOW],
                           env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_SECONDS,
                           start_new_session=True)
    assert child.returncode == -signal.SIGKILL, f"the run was not killed at {fault}: {child.stderr[-2000:]}"


def test_runs_killed_mid_merge_and_between_table_and_state_lose_and_repeat_nothing(spark, settings) -> None:
    landing = Path(settings.root) / "landing"
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
