"""The reference change flow of the project's own graph: the simulator lands patient changes
(late across files and within them, deletes among them), the project's Definitions carry them
through bronze.patient_changes to silver.patients_current (Python, SCD type 1) and
silver.patients_history (SQL, SCD type 2), which match an independent computation from the
landed files and read the same through another Delta reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lakehouse_assets.simulator import land_patient_changes
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata, materialize

from . import reference

FLOW = ["bronze/patient_changes", "silver/patients_current", "silver/patients_history"]


def _landed(landing: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted((landing / "patient_changes").glob("*.json"))
            for line in path.read_text().splitlines()]


def test_landed_changes_reach_both_silver_tables(spark, settings) -> None:
    landing = settings.root / "landing"
    land_patient_changes(landing, files=3, changes_per_file=30, seed=5)
    first = materialization_metadata(materialize(FLOW))
    assert first["silver/patients_current"]["micro_batches"] == 1
    land_patient_changes(landing, files=2, changes_per_file=30, seed=5)  # late changes of earlier files among them
    materialize(FLOW)

    changes = _landed(landing)
    assert any(c["op"] == "DELETE" for c in changes)
    current = delta_rows(settings, "silver", "patients_current", ["mrn", "name"])
    assert current == sorted(tuple(r.values()) for r in reference.scd1(changes, columns=["name"]))
    history = delta_rows(settings, "silver", "patients_history", ["mrn", "name", "__START_AT", "__END_AT"])
    expected = reference.scd2(changes, tracked=["name"], columns=["name"])
    assert history == sorted(tuple(r.values()) for r in expected)
    assert len(history) > len(current), "patients changed several times, and history keeps every version"
