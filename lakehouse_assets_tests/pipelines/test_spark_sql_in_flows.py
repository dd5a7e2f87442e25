"""`spark.sql` in a Python flow is read and run as a pipeline's SQL file is: its upstream found
at load, its names resolved as the pipeline's, `STREAM(...)` incremental."""

from __future__ import annotations

import pytest

from lakehouse_assets.definitions import build_definitions
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import TableSpec
from lakehouse_assets_tests.assets.pipeline import delta_rows
from lakehouse_assets_tests.pipelines.reference import asset_specs, materialize_all
from lakehouse_assets_tests.pipelines.test_append_flows import land
from lakehouse_assets_tests.pipelines.test_pipeline_loading import pipeline

FLOWS = """
    from pyspark import pipelines as dp

    @dp.table
    def events():
        return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
                .option("cloudFiles.schemaHints", "id BIGINT, v STRING")
                .load(spark.conf.get("lakehouse.landing") + "/events"))

    @dp.table
    def positive():
        return spark.sql("SELECT id, v FROM STREAM(events) WHERE id > 0")

    @dp.materialized_view
    def totals():
        return spark.sql("SELECT count(*) AS n, max(id) AS top FROM LIVE.positive")
"""


@pytest.mark.slow
def test_spark_sql_in_a_python_flow_reads_the_pipelines_names_incrementally(spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "lakehouse"))
    settings = LakehouseSettings.from_env()
    definitions = build_definitions(settings=settings, pipelines=[pipeline(tmp_path / "sql_flows", FLOWS)])
    specs = asset_specs(definitions)
    assert {d.asset_key.to_user_string() for d in specs["default/positive"].deps} == {"default/events"}
    positive = TableSpec.of(specs["default/positive"].metadata)
    assert positive is not None and positive.streams_from == ("default.events",)
    assert {d.asset_key.to_user_string() for d in specs["default/totals"].deps} == {"default/positive"}

    land(settings, "events", "1.json", range(-1, 3))
    materialize_all(definitions)
    land(settings, "events", "2.json", range(3, 5))
    materialize_all(definitions)

    assert delta_rows(settings, "default", "positive", ["id"]) == [(1,), (2,), (3,), (4,)]
    assert delta_rows(settings, "default", "totals", ["n", "top"]) == [(4, 4)]
