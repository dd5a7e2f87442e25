"""What materializations say about columns, through Dagster with the real IO manager: every
column of every reference table described (from its contract or its SQL's COMMENT), the same
columns declared on the asset before any run, and the column lineage derived as it ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pandera.pyspark as pa
import pyspark.sql.types as T
import pytest

from lakehouse_assets.assets.sql_asset import sql_asset
from lakehouse_assets.assets.table_asset import table_asset
from lakehouse_assets.io import DeltaIOManager
from lakehouse_assets.quality.contract import Contract
from lakehouse_assets.resource import LakehouseResource, SparkSession
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import IO_MANAGER_KEY, STREAM_INPUT_KEY
from lakehouse_assets_tests.assets.pipeline import materialization_metadata
from lakehouse_assets_tests.built import BuiltLakehouse


def materialize(assets: list[Any], selection: Any) -> dg.ExecuteInProcessResult:
    spark = LakehouseResource.from_settings(LakehouseSettings.from_env())
    return dg.materialize(
        assets, selection=selection,
        resources={"lakehouse": spark, IO_MANAGER_KEY: DeltaIOManager(lakehouse=spark),
                   STREAM_INPUT_KEY: DeltaIOManager(lakehouse=spark, read_inputs_as="stream")},
        instance=dg.DagsterInstance.ephemeral(),
    )


def declared_columns(assets: list[Any]) -> dict[str, list[tuple[str, str, str | None]]]:
    """Per table asset, the column schema in its definition: name, type, description."""
    found = {}
    for asset in assets:
        for key, metadata in getattr(asset, "metadata_by_key", {}).items():
            schema = metadata.get("dagster/column_schema")
            if schema is not None:
                schema = getattr(schema, "schema", schema)
                found[key.to_user_string()] = [(c.name, c.type, c.description) for c in schema.columns]
    return found


def lineage_of(metadata: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    deps = metadata["dagster/column_lineage"].deps_by_column
    return {column: [(d.asset_key.to_user_string(), d.column_name) for d in found] for column, found in deps.items()}


def test_the_reference_graph_describes_every_column_and_reports_declared_lineage(built: BuiltLakehouse) -> None:
    from lakehouse_assets.definitions import defs

    assets = list(defs.assets or [])
    tables = [key for asset in assets if isinstance(asset, dg.AssetsDefinition) for key in asset.keys]
    # Each table as the reference lakehouse's build reported it the run it first took rows.
    reported = {**materialization_metadata(built.changes_run.result),
                **materialization_metadata(built.seeds_run.result)}

    declared = declared_columns(assets)
    assert sorted(reported) == sorted(declared) == sorted(key.to_user_string() for key in tables)
    for table, metadata in reported.items():
        columns = [(c.name, c.type, c.description) for c in metadata["dagster/column_schema"].columns]
        assert all(description for _, _, description in columns), f"{table}: {columns}"
        # What the definition declares is what the table holds (in whatever order bronze's
        # inference puts it): the UI's Columns table is right before a run.
        assert sorted(columns) == sorted(declared[table]), table

    assert lineage_of(reported["silver/recordings_enriched"]) == {
        "device_id": [("bronze/recordings", "device_id")], "mrn": [("bronze/recordings", "mrn")],
        "name": [("silver/patients", "name")], "time": [("bronze/recordings", "time")],
        "heartrate": [("bronze/recordings", "heartrate")],
        "_source_file": [("bronze/recordings", "_source_file")], "_source_line": [("bronze/recordings", "_source_line")]}
    assert lineage_of(reported["gold/heartrate_5min"])["window_start"] == [("silver/recordings_enriched", "time")]
    assert lineage_of(reported["silver/patients_history"]) == {
        "mrn": [("bronze/patient_changes", "mrn")], "name": [("bronze/patient_changes", "name")],
        "__START_AT": [("bronze/patient_changes", "seq")], "__END_AT": [("bronze/patient_changes", "seq")]}
    assert lineage_of(reported["gold/patient_changes"]) == {
        "mrn": [("silver/patients_current", "mrn")], "name": [("silver/patients_current", "name")]}
    assert lineage_of(reported["gold/daily_patient_avg"])["avg_heartrate"] == [
        ("silver/recordings_enriched", "heartrate")]
    # Read from files, not tables: nothing to report.
    assert "dagster/column_lineage" not in reported["bronze/recordings"]


def _described_by(text: str) -> Contract:
    class Events(pa.DataFrameModel):  # type: ignore[type-arg]
        id: T.LongType() = pa.Field(nullable=True, description=text)  # type: ignore[valid-type]

    return Contract("silver", "cm_events", Events)


@pytest.mark.parametrize("first, second", [("The event", "Which event it is")])
def test_a_changed_contract_field_or_sql_comment_is_what_the_next_run_reports(
        spark: SparkSession, settings: LakehouseSettings, tmp_path: Path, first: str, second: str) -> None:
    def python_table(contract: Contract) -> dg.AssetsDefinition:
        @table_asset(layer="silver", name="cm_events", columns=contract.described_columns())
        def cm_events(lakehouse: LakehouseResource) -> Any:
            return lakehouse.spark_session.range(3).withColumnRenamed("id", "id")

        return cm_events

    def sql_table(comment: str) -> dg.AssetsDefinition:
        (tmp_path / "counted.sql").write_text(
            f"CREATE OR REFRESH MATERIALIZED VIEW gold.cm_counted (events BIGINT COMMENT '{comment}') "
            "AS SELECT count(*) AS events FROM silver.cm_events")
        return sql_asset(tmp_path / "counted.sql")

    described = {}
    for text in (first, second):
        assets = [python_table(_described_by(text)), sql_table(text)]
        reported = materialization_metadata(materialize(assets, [a.key for a in assets]))
        described[text] = [(table, c.name, c.description) for table, metadata in sorted(reported.items())
                           for c in metadata["dagster/column_schema"].columns]
    assert described == {text: [("gold/cm_counted", "events", text), ("silver/cm_events", "id", text)]
                         for text in (first, second)}
