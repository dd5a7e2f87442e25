"""AUTO CDC FROM SNAPSHOT: full snapshots of the patients lookup land as CSV files, and
silver.patients_snapshot_history keeps every version by comparing each snapshot with the one
before, through the project's Definitions and real Spark; each snapshot applies once, also
after a crash between the table's commit and its state's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakehouse_assets.cdc.sink import STATE_FOLDER
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata, materialize
from lakehouse_assets_tests.storage.helpers import drop_commit

from . import reference

ASSET = "silver/patients_snapshot_history"
SNAPSHOTS = [
    {1: "Ada", 2: "Bo", 3: "Cy"},
    {1: "Ada", 2: "Bob", 4: "Di"},          # 2 renamed, 3 gone, 4 new
    {1: "Ada", 2: "Bob", 3: "Cy", 4: "Di"},  # 3 back
    {2: "Bob", 3: "Cyd", 4: "Di"},          # 1 gone, 3 renamed
]


def _land(settings, number: int, patients: dict[int, str]) -> None:
    folder = Path(settings.root) / "landing" / "patient_snapshots"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"patients-{number:04d}.csv").write_text(
        "mrn,name\n" + "".join(f"{mrn},{name}\n" for mrn, name in patients.items()))


def _as_changes(snapshots: list[dict[int, str]]) -> list[dict[str, Any]]:
    """What changed from each snapshot to the next, worked out by hand-rolled comparison."""
    changes, before = [], {}
    for version, patients in enumerate(snapshots, start=1):
        changes += [{"mrn": m, "name": n, "op": "UPSERT", "seq": version}
                    for m, n in patients.items() if before.get(m) != n]
        changes += [{"mrn": m, "name": None, "op": "DELETE", "seq": version} for m in before if m not in patients]
        before = patients
    return changes


def _history(settings) -> list[tuple]:
    return delta_rows(settings, "silver", "patients_snapshot_history", ["mrn", "name", "__START_AT", "__END_AT"])


def _expected(snapshots: list[dict[int, str]]) -> list[tuple]:
    return sorted(tuple(r.values()) for r in reference.scd2(_as_changes(snapshots), tracked=["name"], columns=["name"]))


def test_history_is_derived_from_snapshots_each_applied_once(spark, settings) -> None:
    assert ASSET not in materialization_metadata(materialize([ASSET]))  # none landed yet: skipped, no table
    for number, patients in enumerate(SNAPSHOTS[:3], start=1):
        _land(settings, number, patients)
    assert materialization_metadata(materialize([ASSET]))[ASSET]["snapshots_applied"] == 3
    assert _history(settings) == _expected(SNAPSHOTS[:3])

    _land(settings, 4, SNAPSHOTS[3])
    # A crash after the table took snapshot 4 and before its state did: the state's commit is gone.
    materialize([ASSET])
    state_log = Path(settings.table_path("silver", "patients_snapshot_history")) / STATE_FOLDER / "_delta_log"
    drop_commit(sorted(state_log.glob("*.json"))[-1])
    run = materialization_metadata(materialize([ASSET]))[ASSET]
    assert run["snapshots_applied"] == 1  # snapshot 4 again: the table skips it, its state takes it
    assert _history(settings) == _expected(SNAPSHOTS)
    assert materialization_metadata(materialize([ASSET]))[ASSET]["snapshots_applied"] == 0
