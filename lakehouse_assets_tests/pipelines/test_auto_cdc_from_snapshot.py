"""Lakeflow's `create_auto_cdc_from_snapshot_flow`, both forms: a function giving the next
snapshot and its version, and a table snapshotted at each of its versions; each kept as the
project's AUTO CDC FROM SNAPSHOT keeps a table (SCD type 2 history, type 1 current)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_assets.definitions import build_definitions
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.assets.pipeline import delta_rows
from lakehouse_assets_tests.pipelines.reference import asset_specs, materialize_all
from lakehouse_assets_tests.pipelines.test_pipeline_loading import pipeline

SNAPSHOTS = """
    from pyspark import pipelines as dp
    from pyspark.sql import functions as F

    LANDING = spark.conf.get("lakehouse.landing")

    @dp.materialized_view
    def patient_snapshots():
        return spark.read.csv(f"{LANDING}/patient_snapshots", header=True,
                              schema="snapshot INT, mrn BIGINT, name STRING")

    def next_snapshot(latest):
        version = 1 if latest is None else latest + 1
        rows = spark.read.table("patient_snapshots").where(F.col("snapshot") == version).drop("snapshot")
        return None if rows.isEmpty() else (rows, version)

    dp.create_streaming_table("patient_history")
    dp.create_auto_cdc_from_snapshot_flow(target="patient_history", source=next_snapshot, keys=["mrn"],
                                          stored_as_scd_type=2)

    @dp.materialized_view
    def patients_now():
        return spark.read.csv(f"{LANDING}/patients_now", header=True, schema="mrn BIGINT, name STRING")

    dp.create_streaming_table("patients_current")
    dp.create_auto_cdc_from_snapshot_flow(target="patients_current", source="patients_now", keys=["mrn"])
"""


def write(settings: LakehouseSettings, source: str, text: str) -> None:
    folder = Path(settings.root) / "landing" / source
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.csv").write_text(text)


@pytest.mark.slow
def test_snapshots_from_a_function_and_from_a_table_keep_history_and_current(spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "lakehouse"))
    settings = LakehouseSettings.from_env()
    definitions = build_definitions(settings=settings, pipelines=[pipeline(tmp_path / "snapshots", SNAPSHOTS)])
    specs = asset_specs(definitions)
    assert {d.asset_key.to_user_string() for d in specs["default/patient_history"].deps} == {"default/patient_snapshots"}
    assert {d.asset_key.to_user_string() for d in specs["default/patients_current"].deps} == {"default/patients_now"}

    write(settings, "patient_snapshots", "snapshot,mrn,name\n1,1,Ann\n1,2,Bob\n2,1,Ann\n2,2,Rob\n2,3,Cy\n3,2,Rob\n")
    write(settings, "patients_now", "mrn,name\n1,Ann\n2,Bob\n")
    materialize_all(definitions)
    write(settings, "patients_now", "mrn,name\n2,Rob\n3,Cy\n")
    materialize_all(definitions)
    materialize_all(definitions)  # no new snapshot: nothing changes

    history = delta_rows(settings, "default", "patient_history", ["mrn", "name", "__START_AT", "__END_AT"], key=repr)
    assert history == sorted([(1, "Ann", 1, 3), (2, "Bob", 1, 2), (2, "Rob", 2, None), (3, "Cy", 2, 3)], key=repr)
    assert delta_rows(settings, "default", "patients_current", ["mrn", "name"]) == [(2, "Rob"), (3, "Cy")]
