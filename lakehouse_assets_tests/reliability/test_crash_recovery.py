"""Exactly-once under crashes: a real SIGKILL at every fault point and on every kind of write.

Each kill is a run in a child process (a JVM of its own), killed with its whole process group,
Spark's JVM included, as a power cut would: at a named fault point (``LAKEHOUSE_FAULT``, see
:mod:`lakehouse_assets.faults`), or, where Delta's own streaming sink writes and no fault point
reaches, the moment the query logs its batch's offsets. A child runs only the tables the point
is met in, over a copy of the reference lakehouse with new data landed, so each costs one JVM
start and one table's query, not the whole graph. After each kill, the invariants that must
hold at any moment (nothing duplicated or half-written, checkpoints agreeing with their
tables); the run after a kill (in this process) recovers; at the end every invariant holds and
the AUTO CDC tables equal an independent computation from the landed changes.

The long campaigns (many kills, at random moments too, over the declared sources' tables and
on an engine) are in ``test_crash_campaigns.py`` (``make test-all``) and ``make soak``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pytest
from deltalake import DeltaTable

from lakehouse_assets.faults import POINTS
from lakehouse_assets_tests.assets.pipeline import TO_SILVER, delta_rows, materialize, run_job, tables
from lakehouse_assets_tests.built import BuiltLakehouse
from lakehouse_assets_tests.cdc import reference
from lakehouse_assets_tests.cdc.test_reference_flow import _landed
from lakehouse_assets_tests.reliability.crash_harness import FILE_KILL, CrashHarness


@dataclass(frozen=True)
class Kill:
    """One killed run: what it dies writing, the fault point (or ``FILE_KILL``) and the hit
    that kills it, the tables it runs, and the step it must die in."""

    what: str
    point: str
    assets: tuple[str, ...]
    step: str
    hit: int = 1


REPLAY_JOB = "quarantine_replay_silver__recordings_enriched"
#: In the order the test kills them; between some, a run in this process recovers the table a
#: later kill reads from.
BRONZE = Kill("Delta's own streaming sink (bronze), as its batch's offsets are logged", FILE_KILL,
              ("bronze/recordings",), "bronze__recordings")
LOOKUP = Kill("a batch write (the patients lookup), before its files", "delta.files_written",
              ("silver/patients",), "silver__patients")
ROUTED_STARTED = Kill("the routed silver's foreachBatch sink, the batch started and nothing written",
                      "batch.started", ("silver/recordings_enriched",), "silver__recordings_enriched")
ROUTED_HALF = Kill("the routed silver's foreachBatch sink, between its quarantine's commit and its table's",
                   "delta.committed", ("silver/recordings_enriched",), "silver__recordings_enriched")
AGGREGATE = Kill("an incremental aggregate's MERGE (gold), its table committed and its state not",
                 "aggregate.table_committed", ("gold/daily_patient_avg",), "gold__daily_patient_avg")
AUTO_CDC = Kill("AUTO CDC's MERGE (SCD type 1), its table committed and its state not", "cdc.table_committed",
                ("bronze/patient_changes", "silver/patients_current"), "silver__patients_current")
BETWEEN_ASSETS = Kill("a table written, the run not yet told", "asset.materialized", ("gold/device_counts",),
                      "gold__device_counts")
REPLAY = Kill("a quarantine replay, its rows in silver and not yet out of the quarantine", "replay.table_committed",
              (f"job:{REPLAY_JOB}",), "replay_silver__recordings_enriched_quarantine")
KILLS = (BRONZE, LOOKUP, ROUTED_STARTED, ROUTED_HALF, AGGREGATE, AUTO_CDC, BETWEEN_ASSETS, REPLAY)


def test_every_fault_point_is_killed_at() -> None:
    """A point added to the faults module gets its kill here."""
    assert {k.point for k in KILLS} - {FILE_KILL} == set(POINTS)


@pytest.mark.slow
def test_a_kill_at_every_fault_point_and_on_every_kind_of_write_loses_and_repeats_nothing(built: BuiltLakehouse):
    harness = CrashHarness(built.root.parent, seed=0, log=print)
    settings = harness.settings
    built.land_recordings(files=1)
    built.land_changes(files=1)

    def kill(kill: Kill) -> None:
        if kill.point == FILE_KILL:
            offsets = settings.checkpoint_path("bronze", "recordings") / "offsets"
            next_batch = max(int(p.name) for p in offsets.iterdir() if p.name.isdigit()) + 1
            outcome = harness.run_child(FILE_KILL, kill_on_path=offsets / str(next_batch), assets=kill.assets)
        else:
            outcome = harness.run_child(kill.point, hit=kill.hit, assets=kill.assets)
        assert outcome.killed and outcome.last_step == kill.step, f"{kill.what}: {outcome}"
        report = harness.check(f"a kill of {kill.what}", pending_ok=True)
        assert report.ok, report.summary()

    kill(BRONZE)
    kill(LOOKUP)
    materialize(tables("bronze/recordings"))  # the run after bronze's kill: its batch once, whatever it held
    kill(ROUTED_STARTED)
    kill(ROUTED_HALF)  # the replay of the batch the first kill started
    materialize(TO_SILVER)  # the replay again: the quarantine skips its commit, the table takes the batch
    kill(AGGREGATE)
    kill(AUTO_CDC)
    kill(BETWEEN_ASSETS)
    # The patients the quarantine waits for land: its rows of them pass now.
    waiting = {mrn for mrn, reason in delta_rows(settings, "silver", "recordings_quarantine",
                                                 ["mrn", "_quarantine_reason"], key=repr) if reason == "known_patient"}
    assert waiting, "the reference landing has recordings of unknown patients"
    (built.landing / "patients" / "late_patients.csv").write_text(
        "mrn,name\n" + "".join(f"{mrn},Patient {mrn}\n" for mrn in sorted(waiting)))
    materialize(tables("silver/patients"))
    kill(REPLAY)

    materialize(dg.AssetSelection.all().without_checks())  # the run after them all: the tables, as the invariants read them
    run_job(REPLAY_JOB)  # the replay after its kill finishes what the killed one began

    report = harness.check("the runs after the kills", pending_ok=False)
    assert report.ok, report.summary()
    quarantined = {mrn for (mrn,) in delta_rows(settings, "silver", "recordings_quarantine", ["mrn"], key=repr)}
    assert not waiting & quarantined, "the rows of the patients landed late are still quarantined"
    changes = _landed(built.landing)
    current = delta_rows(settings, "silver", "patients_current", ["mrn", "name"])
    assert current == sorted(tuple(r.values()) for r in reference.scd1(changes, columns=["name"]))
    history = delta_rows(settings, "silver", "patients_history", ["mrn", "name", "__START_AT", "__END_AT"])
    assert history == sorted(tuple(r.values()) for r in reference.scd2(changes, tracked=["name"], columns=["name"]))


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
    checkpoint = settings.checkpoint_path("gold", "heartrate_5min")
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
    return DeltaTable(str(built.settings.table_path(layer, name))).to_pyarrow_table().to_pylist()
