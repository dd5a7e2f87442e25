"""Exactly-once under crashes: a fault at every fault point, and a real SIGKILL on every kind of write.

A kill is a run in a child process (a JVM of its own), killed with its whole process group,
Spark's JVM included, as a power cut would: at a named fault point (``LAKEHOUSE_FAULT``, see
:mod:`lakehouse_assets.faults`), or, where Delta's own streaming sink writes and no fault point
reaches, the moment the query logs its batch's offsets. One kill lands on each kind of write:
Delta's own streaming sink (bronze), the ``foreachBatch`` sink writing a table and its
quarantine, and a MERGE (AUTO CDC). A child runs only the tables the point is met in, over the
reference lakehouse with new data landed.

The other fault points are met by an injected fault instead (:func:`~lakehouse_assets.faults.raising_at`):
a run in this process that stops at the point by an exception, without a process and a JVM to
start. That it leaves on disk what the kill leaves is shown at the two kills inside a query's
``foreachBatch`` (the routed sink's, AUTO CDC's): from the same lakehouse, the killed run and
the injected one leave the same commits, rows and checkpoint batches.

After each fault, the invariants that must hold at any moment (nothing duplicated or
half-written, no batch committed twice); the run after it (in this process)
recovers; at the end every invariant holds and the AUTO CDC tables equal an independent
computation from the landed changes.

The long campaigns (many kills, at random moments too, over the declared sources' tables and
on an engine) are in ``test_crash_campaigns.py`` (``make test-all``) and ``make soak``.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from deltalake import DeltaTable

from lakehouse_assets.faults import POINTS, raising_at
from lakehouse_assets_tests.assets.pipeline import TO_SILVER, delta_rows, materialize, run_job, tables
from lakehouse_assets_tests.built import BuiltLakehouse
from lakehouse_assets_tests.cdc import reference
from lakehouse_assets_tests.cdc.test_reference_flow import _landed
from lakehouse_assets_tests.reliability.crash_harness import FILE_KILL, CrashHarness
from lakehouse_assets_tests.reliability.disk_state import disk_state


@dataclass(frozen=True)
class Fault:
    """One run stopped at a fault: what it stops writing, the fault point (or ``FILE_KILL``)
    and the hit that stops it, the tables it runs, and the step it must stop in."""

    what: str
    point: str
    assets: tuple[str, ...]
    step: str
    hit: int = 1


REPLAY_JOB = "quarantine_replay_silver__recordings_enriched"
#: In the order the test meets them; between some, a run in this process recovers the table a
#: later fault reads from.
BRONZE = Fault("Delta's own streaming sink (bronze), as its batch's offsets are logged", FILE_KILL,
               ("bronze/recordings",), "bronze__recordings")
LOOKUP = Fault("a batch write (the patients lookup), before its files", "delta.files_written",
               ("silver/patients",), "silver__patients")
ROUTED_STARTED = Fault("the routed silver's foreachBatch sink, the batch started and nothing written",
                       "batch.started", ("silver/recordings_enriched",), "silver__recordings_enriched")
ROUTED_HALF = Fault("the routed silver's foreachBatch sink, between its quarantine's commit and its table's",
                    "delta.committed", ("silver/recordings_enriched",), "silver__recordings_enriched")
AGGREGATE = Fault("a stateful aggregation's MERGE (gold), the table committed, the batch's state and checkpoint not",
                  "delta.committed", ("gold/daily_patient_avg",), "gold__daily_patient_avg")
AUTO_CDC = Fault("AUTO CDC's MERGE (SCD type 1), its table committed and its state not", "cdc.table_committed",
                 ("silver/patients_current",), "silver__patients_current")
BETWEEN_ASSETS = Fault("a table written, the run not yet told", "asset.materialized", ("gold/device_counts",),
                       "gold__device_counts")
REPLAY = Fault("a quarantine replay, its rows in silver and not yet out of the quarantine", "replay.table_committed",
               (f"job:{REPLAY_JOB}",), "replay_silver__recordings_enriched_quarantine")
#: A real SIGKILL on each kind of write: Delta's own streaming sink, the foreachBatch sink
#: writing a table and its quarantine, a MERGE.
KILLED = (BRONZE, ROUTED_HALF, AUTO_CDC)
INJECTED = (LOOKUP, ROUTED_STARTED, AGGREGATE, BETWEEN_ASSETS, REPLAY)


def test_every_fault_point_is_met() -> None:
    """A point added to the faults module gets its fault here."""
    assert {f.point for f in (*KILLED, *INJECTED)} - {FILE_KILL} == set(POINTS)


@pytest.mark.slow
@pytest.mark.parametrize("kill_everywhere", [
    pytest.param(False, id="a_kill_on_each_kind_of_write"),
    # make test-all: a real kill at every point, as make test did before the injected faults.
    pytest.param(True, id="a_kill_at_every_point", marks=pytest.mark.campaign),
])
def test_a_fault_at_every_point_and_a_kill_on_every_kind_of_write_lose_and_repeat_nothing(
        built: BuiltLakehouse, tmp_path: Path, kill_everywhere: bool):
    harness = CrashHarness(built.root.parent, seed=0, log=print)
    settings = harness.settings
    built.land_recordings(files=1)
    built.land_changes(files=1)

    def kill(fault: Fault) -> None:
        if fault.point == FILE_KILL:
            offsets = Path(settings.checkpoint_path("bronze", "recordings")) / "offsets"
            next_batch = max(int(p.name) for p in offsets.iterdir() if p.name.isdigit()) + 1
            outcome = harness.run_child(FILE_KILL, kill_on_path=offsets / str(next_batch), assets=fault.assets)
        else:
            outcome = harness.run_child(fault.point, hit=fault.hit, assets=fault.assets)
        assert outcome.killed and outcome.last_step == fault.step, f"{fault.what}: {outcome}"
        report = harness.check(f"a kill of {fault.what}", pending_ok=True)
        assert report.ok, report.summary()

    def inject(fault: Fault) -> None:
        if kill_everywhere:
            return kill(fault)
        with raising_at(fault.point, fault.hit):
            if fault.assets[0].startswith("job:"):
                result = run_job(fault.assets[0].removeprefix("job:"), raise_on_error=False)
            else:
                result = materialize(list(fault.assets), raise_on_error=False)
        failed = {event.step_key: event.step_failure_data.error for event in result.all_events
                  if event.is_step_failure}
        assert list(failed) == [fault.step], f"{fault.what}: the steps that failed: {list(failed)}"
        error = failed[fault.step]
        assert error is not None and f"fault injected at {fault.point}" in error.to_string(), error
        report = harness.check(f"a fault injected at {fault.what}", pending_ok=True)
        assert report.ok, report.summary()

    def kill_then_inject(fault: Fault) -> None:
        """The kill, then from the lakehouse as it stood before it, the injected fault at the
        same point: both must leave the same state; the test goes on from the kill's."""
        if kill_everywhere:
            return kill(fault)
        before, killed = tmp_path / "before", tmp_path / "killed"
        for copy in (before, killed):
            shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(harness.root, before, symlinks=True)
        kill(fault)
        after_kill = disk_state(harness.root)
        assert after_kill.differences(disk_state(before)), f"{fault.what}: the kill left nothing to compare"
        shutil.copytree(harness.root, killed, symlinks=True)
        _replace(harness.root, before)
        inject(fault)
        differences = after_kill.differences(disk_state(harness.root))
        assert not differences, f"{fault.what}: the injected fault left another state than the kill:\n" + \
            "\n".join(differences)
        _replace(harness.root, killed)

    kill(BRONZE)
    inject(LOOKUP)
    materialize(tables("bronze/recordings"))  # the run after bronze's kill: its batch once, whatever it held
    inject(ROUTED_STARTED)
    kill_then_inject(ROUTED_HALF)  # the replay of the batch the first fault started
    materialize(TO_SILVER)  # the replay again: the quarantine skips its commit, the table takes the batch
    inject(AGGREGATE)
    # The landed changes into bronze in this process: the kill's child (a JVM starting cold)
    # runs the MERGE it is killed in, and nothing before it.
    materialize(tables("bronze/patient_changes"))
    kill_then_inject(AUTO_CDC)
    inject(BETWEEN_ASSETS)
    # The patients the quarantine waits for land: its rows of them pass now.
    waiting = {mrn for mrn, reason in delta_rows(settings, "silver", "recordings_quarantine",
                                                 ["mrn", "_quarantine_reason"], key=repr) if reason == "known_patient"}
    assert waiting, "the reference landing has recordings of unknown patients"
    (built.landing / "patients" / "late_patients.csv").write_text(
        "mrn,name\n" + "".join(f"{mrn},Patient {mrn}\n" for mrn in sorted(waiting)))
    materialize(tables("silver/patients"))
    inject(REPLAY)

    materialize(dg.AssetSelection.all().without_checks())  # the run after them all: the tables, as the invariants read them
    run_job(REPLAY_JOB)  # the replay after its fault finishes what the stopped one began

    report = harness.check("the runs after the faults", pending_ok=False)
    assert report.ok, report.summary()
    quarantined = {mrn for (mrn,) in delta_rows(settings, "silver", "recordings_quarantine", ["mrn"], key=repr)}
    assert not waiting & quarantined, "the rows of the patients landed late are still quarantined"
    changes = _landed(built.landing)
    current = delta_rows(settings, "silver", "patients_current", ["mrn", "name"])
    assert current == sorted(tuple(r.values()) for r in reference.scd1(changes, columns=["name"]))
    history = delta_rows(settings, "silver", "patients_history", ["mrn", "name", "__START_AT", "__END_AT"])
    assert history == sorted(tuple(r.values()) for r in reference.scd2(changes, tracked=["name"], columns=["name"]))


def _replace(root: Path, by: Path) -> None:
    """Put the lakehouse copy ``by`` at ``root``, as :meth:`BuiltLakehouse.restore` does."""
    shutil.rmtree(root)
    shutil.copytree(by, root, symlinks=True)


@pytest.mark.slow
def test_a_stateful_query_that_died_between_its_commit_and_its_checkpoint_writes_each_window_once(
        built: BuiltLakehouse):
    """gold.heartrate_5min (windows, a watermark: state in Spark's state store) is appended
    by Delta's own sink, which no fault point reaches: the crash is left as a kill there
    leaves it, the batch committed to Delta and not recorded as done in the checkpoint. The
    next run replays it from the state as it was, Delta skips it, and no window is written
    twice or lost."""
    settings = built.settings
    built.land_recordings(files=1)
    windows = tables("gold/heartrate_5min")
    materialize(TO_SILVER)
    materialize(windows)
    table = str(settings.table_path("gold", "heartrate_5min"))
    writing = max(int(c["operationParameters"]["epochId"]) for c in DeltaTable(table).history()
                  if c["operation"] == "STREAMING UPDATE" and int(c["operationMetrics"].get("numOutputRows", 0)))
    checkpoint = Path(settings.checkpoint_path("gold", "heartrate_5min"))
    last = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    for batch in range(writing, last + 1):
        for folder, first in (("commits", writing), ("offsets", writing + 1)):
            if batch >= first:
                for name in (str(batch), f".{batch}.crc"):
                    (checkpoint / folder / name).unlink(missing_ok=True)

    materialize(windows)  # replays batch `writing`

    assert (checkpoint / "commits" / str(writing)).exists()
    replayed = [c for c in DeltaTable(table).history() if c["operation"] == "STREAMING UPDATE"
                and int(c["operationParameters"]["epochId"]) == writing]
    assert len(replayed) == 1, "Delta committed the replayed batch again"
    written = Counter((r["device_id"], r["window_start"]) for r in _rows(built, "gold", "heartrate_5min"))
    assert written and max(written.values()) == 1, "a window was written twice"
    counted = sum(r["recordings"] for r in _rows(built, "gold", "heartrate_5min"))
    silver_rows = len(_rows(built, "silver", "recordings_enriched"))
    assert 0 < counted <= silver_rows  # windows still open (behind the watermark) are not written yet


def _rows(built: BuiltLakehouse, layer: str, name: str) -> list[dict[str, Any]]:
    return DeltaTable(str(Path(built.settings.table_path(layer, name)))).to_pyarrow_table().to_pylist()
