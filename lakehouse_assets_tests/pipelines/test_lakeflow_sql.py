"""The reference pipeline written as Lakeflow SQL (examples/reference_lakeflow_sql), loaded
through LAKEHOUSE_PIPELINES and run through Dagster from its landing sensors, beside the
project's own reference tables on the same landed files: its tables equal theirs, its
quarantine says why, and verify's invariants hold for both."""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import pytest

from lakehouse_assets.assets.table_asset import EXPECTATIONS
from lakehouse_assets.reliability import check_all, declared_flows
from lakehouse_assets.reliability.invariants import LANDED_ONCE, ROUTED
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.assets.pipeline import delta_rows
from lakehouse_assets_tests.pipelines.reference import ENRICHED, EXAMPLES, reference_run

EXAMPLE = EXAMPLES / "reference_lakeflow_sql"
SCHEMA = "lakeflow_sql"


@pytest.fixture(scope="module")
def lakeflow_sql(spark, tmp_path_factory) -> Iterator[tuple[LakehouseSettings, dg.Definitions, list]]:
    """Reference data landed, then what the landing sensors request, with the SQL pipeline
    loaded beside the project's tables (read only)."""
    with reference_run(tmp_path_factory.mktemp("lakeflow_sql") / "lakehouse", EXAMPLE) as ran:
        yield ran


@pytest.mark.slow
def test_the_sql_pipelines_tables_equal_the_native_ones(lakeflow_sql) -> None:
    settings, definitions, results = lakeflow_sql

    assert all(result.success for result in results)
    built = {e.asset_key.to_user_string() for r in results for e in r.get_asset_materialization_events()}
    assert built >= {f"{SCHEMA}/{name}" for name in (
        "recordings_bronze", "patients", "recordings_enriched", "recordings_enriched_quarantine",
        "daily_patient_avg", "device_counts")}
    pairs = [("recordings_enriched", ("silver", "recordings_enriched"), ENRICHED),
             ("daily_patient_avg", ("gold", "daily_patient_avg"), ["mrn", "name", "date", "avg_heartrate"]),
             ("device_counts", ("gold", "device_counts"), ["device_id", "total_recordings"]),
             # CREATE FLOW ... AS AUTO CDC INTO, SCD types 1 and 2.
             ("patients_current", ("silver", "patients_current"), ["mrn", "name"]),
             ("patients_history", ("silver", "patients_history"), ["mrn", "name", "__START_AT", "__END_AT"])]
    for name, native_table, columns in pairs:
        ours = delta_rows(settings, SCHEMA, name, columns, key=repr)
        assert ours, name
        assert ours == delta_rows(settings, *native_table, columns, key=repr), name
    quarantined = delta_rows(settings, SCHEMA, "recordings_enriched_quarantine", ["_quarantine_reason"])
    native = delta_rows(settings, "silver", "recordings_quarantine", ["_quarantine_reason"])
    assert len(quarantined) == len(native) > 0
    assert {rule for (reason,) in quarantined for rule in reason.split(",")} <= {
        "known_patient", "mrn_positive", "heartrate_positive", "heartrate_in_range", "time_plausible"}
    # Dependencies, descriptions and declared columns come from the SQL file.
    graph = dg.Definitions.merge(definitions).resolve_asset_graph()
    enriched = graph.get(dg.AssetKey([SCHEMA, "recordings_enriched"]))
    assert {key.to_user_string() for key in enriched.parent_keys} == {
        f"{SCHEMA}/recordings_bronze", f"{SCHEMA}/patients"}
    assert enriched.description.startswith("Recordings of known patients")
    assert [(e["name"], e["on_violation"]) for e in enriched.metadata[EXPECTATIONS]] == [
        *((name, "drop row") for name in ("known_patient", "mrn_positive", "heartrate_positive", "heartrate_in_range",
                                           "time_plausible")), ("device_id_present", "warn")]
    patients = graph.get(dg.AssetKey([SCHEMA, "patients"]))
    columns = patients.metadata["dagster/column_schema"].columns
    assert [(c.name, c.description) for c in columns] == [
        ("mrn", "The medical record number of the patient"), ("name", "The name of the patient")]


@pytest.mark.slow
def test_the_sql_pipelines_checks_run_and_its_tables_hold_verifys_invariants(lakeflow_sql) -> None:
    settings, definitions, results = lakeflow_sql

    evaluations = {(e.asset_key.to_user_string(), e.check_name): e.passed
                   for r in results for e in r.get_asset_check_evaluations()}
    assert evaluations[(f"{SCHEMA}/recordings_enriched", "data_freshness")]
    report = check_all(settings, flows=declared_flows(definitions.assets or []))
    assert report.ok, report.summary()
    assert f"{SCHEMA}.recordings_bronze" in report.result(LANDED_ONCE).checked
    assert f"{SCHEMA}.recordings_enriched" in report.result(ROUTED).checked
