"""SQL-defined assets through Dagster with the real IO manager, the shared session and real
tables: a streaming table reads only what is new, a materialized view is recomputed, and both
report their lineage, read from their SQL, like Python assets."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from lakehouse_assets.assets.sql_asset import sql_asset
from lakehouse_assets.io import DeltaIOManager
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import IO_MANAGER_KEY, STREAM_INPUT_KEY
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata

EVENTS_SCHEMA = "id BIGINT, value BIGINT"

STREAMING = """
-- positive events, doubled
CREATE OR REFRESH STREAMING TABLE silver.sq_doubled
COMMENT 'Positive events, doubled.'
AS SELECT e.id, e.value * 2 AS doubled FROM STREAM(bronze.sq_events) e WHERE e.value > 0
"""
VIEW = """
CREATE OR REFRESH MATERIALIZED VIEW gold.sq_total
AS SELECT count(*) AS events, sum(doubled) AS total FROM silver.sq_doubled
"""


def materialize(*assets: dg.AssetsDefinition) -> dg.ExecuteInProcessResult:
    spark = LakehouseResource.from_settings(LakehouseSettings.from_env())
    return dg.materialize(
        [*assets, dg.AssetSpec(["bronze", "sq_events"]).with_io_manager_key(IO_MANAGER_KEY)],
        selection=[a.key for a in assets],
        resources={"lakehouse": spark, IO_MANAGER_KEY: DeltaIOManager(lakehouse=spark),
                   STREAM_INPUT_KEY: DeltaIOManager(lakehouse=spark, read_inputs_as="stream")},
        instance=dg.DagsterInstance.ephemeral(),
    )


def test_a_streaming_table_and_a_materialized_view_from_sql_files(spark, store, settings, tmp_path: Path) -> None:
    (tmp_path / "doubled.sql").write_text(STREAMING)
    (tmp_path / "total.sql").write_text(VIEW)
    doubled, total = sql_asset(tmp_path / "doubled.sql"), sql_asset(tmp_path / "total.sql")
    events = str(settings.table_path("bronze", "sq_events"))
    store.write(spark.createDataFrame([(1, 1), (2, -2), (3, 3)], EVENTS_SCHEMA), events)

    first = materialization_metadata(materialize(doubled, total))
    store.write(spark.createDataFrame([(4, 4)], EVENTS_SCHEMA), events, mode="append")
    second = materialization_metadata(materialize(doubled, total))

    assert delta_rows(settings, "silver", "sq_doubled", ["id", "doubled"]) == [(1, 2), (3, 6), (4, 8)]
    assert (first["silver/sq_doubled"]["rows_written"], second["silver/sq_doubled"]["rows_written"]) == (2, 1)
    assert delta_rows(settings, "gold", "sq_total", ["events", "total"]) == [(3, 16)]

    key = dg.AssetKey(["silver", "sq_doubled"])
    spec = doubled.specs_by_key[key]
    assert spec.description == "Positive events, doubled."
    assert [d.asset_key for d in spec.deps] == [dg.AssetKey(["bronze", "sq_events"])]
    assert [d.asset_key for d in total.specs_by_key[dg.AssetKey(["gold", "sq_total"])].deps] == [key]
    lineage = second["silver/sq_doubled"]["dagster/column_lineage"].deps_by_column
    assert {column: [(d.asset_key.to_user_string(), d.column_name) for d in deps] for column, deps in lineage.items()} == {
        "id": [("bronze/sq_events", "id")], "doubled": [("bronze/sq_events", "value")]}
