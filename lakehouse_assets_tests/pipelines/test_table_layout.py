"""A pipeline's `partition_cols` / `cluster_by` and SQL `PARTITIONED BY` / `CLUSTER BY`: the
tables are created laid out so, whichever way the lakehouse writes them (Auto Loader bronze,
a routed table and its quarantine, a materialized view)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakehouse_assets.definitions import build_definitions
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.pipelines.reference import materialize_all
from lakehouse_assets_tests.pipelines.test_append_flows import land
from lakehouse_assets_tests.pipelines.test_pipeline_loading import pipeline

PYTHON = """
    from pyspark import pipelines as dp

    @dp.table(partition_cols=["clinic"], table_properties={"delta.appendOnly": "true"})
    def visits():
        return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
                .option("cloudFiles.schemaHints", "id BIGINT, v STRING")
                .load(spark.conf.get("lakehouse.landing") + "/visits")
                .selectExpr("*", "substr(v, 1, 1) AS clinic"))

    @dp.materialized_view(cluster_by=["clinic"])
    def per_clinic():
        return spark.read.table("checked").groupBy("clinic").count()
"""

SQL = """
    CREATE OR REFRESH STREAMING TABLE checked (
      CONSTRAINT small EXPECT (id < 3) ON VIOLATION DROP ROW
    ) CLUSTER BY (id) AS SELECT * FROM STREAM(visits);
"""


@pytest.mark.slow
def test_declared_partitioning_and_clustering_lay_out_the_tables_they_create(spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "lakehouse"))
    settings = LakehouseSettings.from_env()
    folder = pipeline(tmp_path / "laid_out", PYTHON)
    (folder / "transformations" / "checked.sql").write_text(textwrap.dedent(SQL))
    definitions = build_definitions(settings=settings, pipelines=[folder])

    land(settings, "visits", "1.json", range(0, 5))
    materialize_all(definitions)

    def layout(name: str) -> tuple[list[str], list[str]]:
        row = spark.sql(f"DESCRIBE DETAIL delta.`{Path(settings.table_path('default', name))}`").first()
        return list(row["partitionColumns"]), list(row["clusteringColumns"])

    assert layout("visits") == (["clinic"], [])
    assert layout("checked") == ([], ["id"])
    assert layout("checked_quarantine") == ([], [])  # the quarantine keeps rows as they came, unlaid
    assert layout("per_clinic") == ([], ["clinic"])
    visits = DeltaTable(str(settings.table_path("default", "visits")))
    assert visits.metadata().configuration["delta.appendOnly"] == "true"
    assert visits.to_pyarrow_table().num_rows == 5
    counted = DeltaTable(str(settings.table_path("default", "per_clinic"))).to_pyarrow_table().to_pylist()
    assert counted == [{"clinic": "v", "count": 3}]
