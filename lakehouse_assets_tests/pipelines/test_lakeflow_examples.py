"""The reference pipeline written as Lakeflow Python (examples/reference_lakeflow_python) and
as Lakeflow SQL (examples/reference_lakeflow_sql), both loaded through LAKEHOUSE_PIPELINES and
run through Dagster from the landing sensors, beside the project's own reference tables on the
same landed files (one run of the three, shared): each one's tables equal the native ones, its
quarantine says why, and verify's invariants hold for all."""

from __future__ import annotations

import os
from collections.abc import Iterator

import dagster as dg
import pytest

from lakehouse_assets.definitions import build_definitions
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.reliability import check_all, declared_flows
from lakehouse_assets.reliability.invariants import LANDED_ONCE, ROUTED
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import land
from lakehouse_assets.spec import TableSpec
from lakehouse_assets_tests.assets.pipeline import delta_rows, expected_outputs, spark_rows
from lakehouse_assets_tests.pipelines.reference import ENRICHED, EXAMPLES, reference_run

EXAMPLE = EXAMPLES / "reference_lakeflow_python"
SQL_EXAMPLE = EXAMPLES / "reference_lakeflow_sql"
#: Each example's schema: the Python one's is the spec's default, the SQL one's its own.
SCHEMAS = {"python": "default", "sql": "lakeflow_sql"}
#: On a Spark Connect engine (the Connect pass) the Python example alone: its flows are called
#: with the run's Connect session behind the pipeline's `spark`, the path that differs there.
#: The SQL example's statements become SQL assets, which the Connect pass runs in
#: io/test_replay_sql.py; its loading is the driver's, the same on both engines.
ON_ENGINE = bool(os.environ.get("LAKEHOUSE_SPARK_REMOTE"))
EXAMPLES_RUN = {"python": EXAMPLE} if ON_ENGINE else {"python": EXAMPLE, "sql": SQL_EXAMPLE}


@pytest.fixture(scope="module")
def lakeflow(built_once) -> Iterator[tuple[LakehouseSettings, dg.Definitions, list]]:
    """The reference lakehouse, then what the landing sensors request, with the Lakeflow
    examples loaded beside the project's tables (read only)."""
    with reference_run(built_once, *EXAMPLES_RUN.values()) as ran:
        yield ran


@pytest.mark.slow
@pytest.mark.parametrize("schema", SCHEMAS.values(), ids=SCHEMAS.keys())
def test_each_lakeflow_examples_tables_equal_the_native_ones(lakeflow, schema) -> None:
    if schema not in {SCHEMAS[example] for example in EXAMPLES_RUN}:
        pytest.skip("on an engine the Python example alone runs (EXAMPLES_RUN)")
    settings, _, results = lakeflow

    assert all(result.success for result in results)
    built = {e.asset_key.to_user_string() for r in results for e in r.get_asset_materialization_events()}
    assert built >= {f"{schema}/{name}" for name in (
        "recordings_bronze", "patients", "recordings_enriched", "recordings_enriched_quarantine",
        "daily_patient_avg", "device_counts")}
    pairs = [("recordings_enriched", ("silver", "recordings_enriched"), ENRICHED),
             ("daily_patient_avg", ("gold", "daily_patient_avg"), ["mrn", "name", "date", "avg_heartrate"]),
             ("device_counts", ("gold", "device_counts"), ["device_id", "total_recordings"]),
             # AUTO CDC (dp.create_auto_cdc_flow; CREATE FLOW ... AS AUTO CDC INTO), SCD types 1 and 2.
             ("patients_current", ("silver", "patients_current"), ["mrn", "name"]),
             ("patients_history", ("silver", "patients_history"), ["mrn", "name", "__START_AT", "__END_AT"])]
    for name, native_table, columns in pairs:
        ours = delta_rows(settings, schema, name, columns, key=repr)
        assert ours, name
        assert ours == delta_rows(settings, *native_table, columns, key=repr), name
    quarantined = delta_rows(settings, schema, "recordings_enriched_quarantine", ["_quarantine_reason"])
    native = delta_rows(settings, "silver", "recordings_quarantine", ["_quarantine_reason"])
    assert len(quarantined) == len(native) > 0
    # Each dropped row names the expectations it failed, as written in the pipeline's file.
    assert {rule for (reason,) in quarantined for rule in reason.split(",")} <= {
        "known_patient", "mrn_positive", "heartrate_positive", "heartrate_in_range", "time_plausible"}


@pytest.mark.slow
def test_the_examples_checks_run_and_their_tables_hold_verifys_invariants(lakeflow) -> None:
    settings, definitions, results = lakeflow

    evaluations = {(e.asset_key.to_user_string(), e.check_name): e.passed
                   for r in results for e in r.get_asset_check_evaluations()}
    report = check_all(LakehouseResource.from_settings(settings), flows=declared_flows(definitions.assets or []))
    assert report.ok, report.summary()
    for schema in (SCHEMAS[example] for example in EXAMPLES_RUN):
        assert evaluations[(f"{schema}/recordings_enriched", "data_freshness")]
        assert evaluations[(f"{schema}/recordings_bronze", "data_freshness")]
        assert f"{schema}.recordings_bronze" in report.result(LANDED_ONCE).checked
        assert f"{schema}.recordings_enriched" in report.result(ROUTED).checked


@pytest.mark.slow
def test_the_sql_examples_graph_comes_from_its_files(lakeflow) -> None:
    if "sql" not in EXAMPLES_RUN:
        pytest.skip("on an engine the Python example alone runs (EXAMPLES_RUN)")
    _, definitions, _ = lakeflow
    schema = SCHEMAS["sql"]

    graph = dg.Definitions.merge(definitions).resolve_asset_graph()
    enriched = graph.get(dg.AssetKey([schema, "recordings_enriched"]))
    assert {key.to_user_string() for key in enriched.parent_keys} == {
        f"{schema}/recordings_bronze", f"{schema}/patients"}
    assert enriched.description.startswith("Recordings of known patients")
    declared = TableSpec.of(enriched.metadata)
    assert declared is not None
    assert [(e.name, e.on_violation) for e in declared.expectations] == [
        *((name, "drop row") for name in ("known_patient", "mrn_positive", "heartrate_positive", "heartrate_in_range",
                                           "time_plausible")), ("device_id_present", "warn")]
    patients = graph.get(dg.AssetKey([schema, "patients"]))
    columns = patients.metadata["dagster/column_schema"].columns
    assert [(c.name, c.description) for c in columns] == [
        ("mrn", "The medical record number of the patient"), ("name", "The name of the patient")]


@pytest.mark.slow
def test_the_benchmarks_sdp_pipeline_loads_unchanged_and_computes_the_courses_tables(spark, tmp_path,
                                                                                    monkeypatch) -> None:
    from benchmarks.contenders import Workspace, sdp

    workspace = Workspace(tmp_path)
    sdp.prepare(workspace)  # the contender's own folder: its spec, its file copied as it is
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(workspace.root))
    monkeypatch.setenv("BENCH_SDP_LANDING", str(workspace.landing))
    settings = LakehouseSettings.from_env()
    land(workspace.landing, files=2, records_per_file=200)
    definitions = build_definitions(settings=settings, pipelines=[sdp.project(workspace)])

    result = dg.materialize([*(definitions.assets or []), *(definitions.asset_checks or [])],
                            selection="*", resources=dict(definitions.resources or {}),
                            instance=dg.DagsterInstance.ephemeral(), raise_on_error=True)

    assert result.success
    expected = expected_outputs(spark, workspace.landing)
    for table, columns in (("recordings_enriched", ENRICHED), ("daily_patient_avg", ["mrn", "name", "date",
                                                                                     "avg_heartrate"])):
        assert delta_rows(settings, "default", table, columns) == spark_rows(expected[table], columns), table


@pytest.mark.slow
def test_materialize_all_over_a_pipeline_with_nothing_landed_is_green_and_builds_nothing(tmp_path,
                                                                                        monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "lakehouse"))
    definitions = build_definitions(settings=LakehouseSettings.from_env(), pipelines=[EXAMPLE])

    result = dg.materialize([*(definitions.assets or []), *(definitions.asset_checks or [])],
                            selection="*", resources=dict(definitions.resources or {}),
                            instance=dg.DagsterInstance.ephemeral(), raise_on_error=True)

    assert result.success
    assert result.get_asset_materialization_events() == []


@pytest.mark.slow
def test_a_pipelines_quarantine_is_not_replayed_but_refused_with_the_way_out(lakeflow, spark) -> None:
    from lakehouse_assets.io.replay import replay_quarantine, routed_table_assets
    from lakehouse_assets.storage import DeltaTableStore

    settings, definitions, _ = lakeflow
    routed = routed_table_assets(list(definitions.assets or []))
    assert "default.recordings_enriched" not in routed_table_assets(list(definitions.assets or []), replayable=True)

    with pytest.raises(LakehouseError, match="lakehouse reset default.recordings_enriched"):
        replay_quarantine(routed["default.recordings_enriched"], spark, settings, DeltaTableStore())
