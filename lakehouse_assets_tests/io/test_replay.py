"""Quarantine replay through real Spark, real tables and a Dagster job: recordings quarantined
for an unknown patient move to silver once the patient is landed, exactly once, the accounting
(bronze = silver + quarantine) true at every moment, a crash between the two commits
included; gold takes them in on its next run."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from lakehouse_assets.cli import main
from lakehouse_assets.definitions import defs
from lakehouse_assets.io import replay as replay_module
from lakehouse_assets.io.replay import replay_quarantine, routed_table_assets
from lakehouse_assets.reliability import check_all
from lakehouse_assets.reliability.flows import project_flows
from lakehouse_assets.reliability.routed import check_routed
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets_tests.assets.pipeline import SEED_WITHOUT_CHECKS, current_resources, materialize


class Crash(Exception):
    """Stands in for a process killed at a fault point."""


def quarantined_for_unknown_patient(tables_rows: list) -> dict[int, int]:
    found: dict[int, int] = {}
    for row in tables_rows:
        if row["_quarantine_reason"] == "known_patient":
            found[row["mrn"]] = found.get(row["mrn"], 0) + 1
    return found


def rows(spark, store, settings, table: str) -> list:
    return store.read(spark, str(settings.table_path(*table.split(".")))).collect()


@pytest.mark.slow
def test_rows_that_pass_now_move_to_silver_once_whatever_crashes(spark, store, built, monkeypatch, capsys):
    settings, landing = built.settings, built.landing
    silver_before = len(rows(spark, store, settings, "silver.recordings_enriched"))
    waiting = quarantined_for_unknown_patient(rows(spark, store, settings, "silver.recordings_quarantine"))
    assert waiting, "the landing has recordings of unknown patients"
    asset = routed_table_assets(list(defs.assets or []))["silver.recordings_enriched"]

    # Nothing changed: nothing passes, nothing moves.
    nothing = replay_quarantine(asset, spark, settings, store)
    assert (nothing.replay, nothing.moved) == (None, 0)

    # Half of the patients are landed and the lookup rebuilt; the Dagster job moves their rows.
    mrns = sorted(waiting)
    first, second = mrns[: len(mrns) // 2 or 1], mrns[len(mrns) // 2 or 1:]
    land_patients(landing, "late_patients_1.csv", first)
    materialize(["silver/patients"])
    job = defs.resolve_job_def("quarantine_replay_silver__recordings_enriched")
    run = job.execute_in_process(instance=dg.DagsterInstance.ephemeral(), resources=current_resources())
    materialized = [e.materialization for e in run.get_asset_materialization_events() if e.materialization]
    reported = {m.asset_key.to_user_string(): m.metadata["rows_replayed"].value for m in materialized}
    moved_first = sum(waiting[m] for m in first)
    assert reported == {"silver/recordings_enriched": moved_first, "silver/recordings_quarantine": moved_first}
    assert check_routed(settings, project_flows()).ok, check_routed(settings, project_flows()).violations

    # The rest, with a crash between the silver commit and the quarantine's: the accounting holds.
    land_patients(landing, "late_patients_2.csv", second)
    materialize(["silver/patients"])

    def crash(point: str) -> None:
        if point == "replay.table_committed":
            raise Crash(point)

    with monkeypatch.context() as patched, pytest.raises(Crash):
        patched.setattr(replay_module, "fault_point", crash)
        replay_quarantine(asset, spark, settings, store)
    assert check_routed(settings, project_flows()).ok, check_routed(settings, project_flows()).violations

    # The next replay finishes that one first, and moves nothing twice.
    result = replay_quarantine(asset, spark, settings, store)
    assert result.finished_earlier == 1 and result.replay is None and result.moved == 0
    silver = rows(spark, store, settings, "silver.recordings_enriched")
    moved = [r for r in silver if r["mrn"] in waiting]
    assert len(moved) == sum(waiting.values()) and len(silver) == silver_before + len(moved)
    assert all(r["name"] == f"Patient {r['mrn']}" for r in moved)
    assert quarantined_for_unknown_patient(rows(spark, store, settings, "silver.recordings_quarantine")) == {}
    assert main(["quarantine", "replay", "silver.recordings_enriched", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["moved"] == 0
    assert main(["quarantine", "replay", "gold.device_counts"]) == 1  # not a routed table
    # Gold takes them in; every invariant holds, the replays' event-log rows included.
    materialize(SEED_WITHOUT_CHECKS)
    report = check_all(LakehouseResource.from_settings(settings))
    assert report.ok, report.summary()


def land_patients(landing, name: str, mrns: list[int]) -> None:
    (landing / "patients" / name).write_text("mrn,name\n" + "".join(f"{mrn},Patient {mrn}\n" for mrn in mrns))
