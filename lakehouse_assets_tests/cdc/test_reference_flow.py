"""The reference change flow of the project's own graph: the simulator lands patient changes
(late across files and within them, deletes among them), the project's Definitions carry them
through bronze.patient_changes to silver.patients_current (Python, SCD type 1) and
silver.patients_history (SQL, SCD type 2), which match an independent computation from the
landed files and read the same through another Delta reader; gold.patient_changes streams
the current table's change data feed, and replaying it gives the current table back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
from deltalake import DeltaTable

from lakehouse_assets.assets.silver import patients_history
from lakehouse_assets.simulator import land_patient_changes
from lakehouse_assets.spec import TableSpec
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata, materialize

from . import reference

FLOW = ["bronze/patient_changes", "silver/patients_current", "silver/patients_history", "gold/patient_changes"]


def _landed(landing: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted((landing / "patient_changes").glob("*.json"))
            for line in path.read_text().splitlines()]


def test_landed_changes_reach_both_silver_tables(spark, settings) -> None:
    landing = Path(settings.root) / "landing"
    land_patient_changes(landing, files=3, changes_per_file=30, seed=5)
    first = materialization_metadata(materialize(FLOW))
    assert first["silver/patients_current"]["micro_batches"] == 1
    second = land_patient_changes(landing, files=2, changes_per_file=30, seed=5)  # late changes of earlier ones among them
    # The same changes landed twice, under another name: applied once.
    shutil.copy(second.paths[0], second.paths[0].with_name("resent.json"))
    materialize(FLOW)

    changes = _landed(landing)
    assert any(c["op"] == "DELETE" for c in changes)
    assert len(delta_rows(settings, "bronze", "patient_changes", ["mrn", "seq"])) == len(changes)
    current = delta_rows(settings, "silver", "patients_current", ["mrn", "name"])
    assert current == sorted(tuple(r.values()) for r in reference.scd1(changes, columns=["name"]))
    history = delta_rows(settings, "silver", "patients_history", ["mrn", "name", "__START_AT", "__END_AT"])
    expected = reference.scd2(changes, tracked=["name"], columns=["name"])
    assert history == sorted(tuple(r.values()) for r in expected)
    assert len(history) > len(current), "patients changed several times, and history keeps every version"

    # The change log, streamed from the current table's change data feed over two runs,
    # replays to the current table, and holds what delta-rs reads from the feed.
    log = delta_rows(settings, "gold", "patient_changes", ["patients_version", "change", "mrn", "name"])
    assert {change for _, change, _, _ in log} >= {"insert", "update"}
    replayed: dict[int, str] = {}
    for _, change, mrn, name in log:  # sorted by version; one change per patient per version
        if change == "delete":
            del replayed[mrn]
        else:
            replayed[mrn] = name
    assert sorted(replayed.items()) == current
    feed = pa.table(DeltaTable(str(settings.table_path("silver", "patients_current"))).load_cdf().read_all())
    assert sorted((r["_commit_version"], r["_change_type"].removesuffix("_postimage"), r["mrn"], r["name"])
                  for r in feed.to_pylist() if r["_change_type"] != "update_preimage") == log
    history_feed = pa.table(DeltaTable(str(settings.table_path("silver", "patients_history"))).load_cdf().read_all())
    assert set(history_feed.column("_change_type").to_pylist()) >= {"insert", "update_postimage"}


def test_the_history_definition_says_how_changes_apply() -> None:
    metadata = patients_history.metadata_by_key[dg.AssetKey(["silver", "patients_history"])]
    spec = TableSpec.of(metadata)
    assert spec is not None and spec.auto_cdc is not None
    assert spec.auto_cdc.stored_as_scd_type == 2 and spec.auto_cdc.keys == ("mrn",)
    assert "SCD type 2 by mrn, ordered by seq" in metadata["auto_cdc"]
