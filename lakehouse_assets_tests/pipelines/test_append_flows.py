"""Several flows into one streaming table (Lakeflow's `@dp.append_flow`): each its own query
and checkpoint, all appending to the one table, each landed record once across runs."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from lakehouse_assets.definitions import build_definitions
from lakehouse_assets.reliability import check_all, declared_flows
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets_tests.assets.pipeline import delta_rows
from lakehouse_assets_tests.pipelines.reference import materialize_all
from lakehouse_assets_tests.pipelines.test_pipeline_loading import pipeline

FLOWS = """
    from pyspark import pipelines as dp

    LANDING = spark.conf.get("lakehouse.landing")

    def landed(source):
        return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
                .option("cloudFiles.schemaHints", "id BIGINT, v STRING").load(f"{LANDING}/{source}"))

    @dp.table
    def clinic_a():
        return landed("clinic_a")

    @dp.table
    def clinic_b():
        return landed("clinic_b")

    dp.create_streaming_table("visits", comment="Visits of every clinic")

    @dp.append_flow(target="visits")
    def from_a():
        return spark.readStream.table("clinic_a").selectExpr("id", "v", "'a' AS clinic")

    @dp.append_flow(target="visits", name="from_b")
    def clinic_b_visits():
        return spark.readStream.table("clinic_b").selectExpr("id", "v", "'b' AS clinic")
"""


def land(settings: LakehouseSettings, source: str, name: str, ids: range) -> None:
    folder = Path(settings.root) / "landing" / source
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(f'{{"id": {i}, "v": "{source}-{i}"}}\n' for i in ids))


@pytest.mark.slow
def test_append_flows_fill_one_table_each_with_its_own_checkpoint_exactly_once(spark, tmp_path,
                                                                              monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "lakehouse"))
    settings = LakehouseSettings.from_env()
    definitions = build_definitions(settings=settings, pipelines=[pipeline(tmp_path / "flows", FLOWS)])
    [visits] = [a for a in definitions.assets or []
                if isinstance(a, dg.AssetsDefinition) and dg.AssetKey(["default", "visits"]) in a.keys]
    assert {dep.to_user_string() for dep in visits.asset_deps[visits.key]} == {"default/clinic_a", "default/clinic_b"}

    land(settings, "clinic_a", "1.json", range(0, 3))
    land(settings, "clinic_b", "1.json", range(10, 12))
    first = materialize_all(definitions)
    land(settings, "clinic_a", "2.json", range(3, 5))
    materialize_all(definitions)
    materialize_all(definitions)  # nothing new: each flow's checkpoint says so

    rows = delta_rows(settings, "default", "visits", ["clinic", "id"])
    assert rows == [("a", i) for i in range(5)] + [("b", i) for i in range(10, 12)]
    checkpoints = Path(settings.checkpoint_path("default", "visits")) / "flows"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["from_a", "from_b"]
    [report] = [e.materialization.metadata for e in first.get_asset_materialization_events()
                if e.asset_key == visits.key]
    assert set(report["flows"].value) == {"from_a", "from_b"}
    assert report["rows_written"].value == 5
    result = check_all(LakehouseResource.from_settings(settings), flows=declared_flows(definitions.assets or []))
    assert result.ok, result.summary()
    # Each flow's batches are its own query's, each committed once to the table it appends to.
    batches = [(c.query, c.batch_id) for c in DeltaTableStore().history(str(settings.table_path("default", "visits")))
               if c.batch_id is not None]
    assert len({query for query, _ in batches}) == 2 and len(batches) == len(set(batches))
