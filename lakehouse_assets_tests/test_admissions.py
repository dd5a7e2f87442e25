"""A second source unlike the reference, declared as a user would (lakehouse_assets_tests/
admissions: CSV files, a bronze table, a SQL silver table with DROP ROW constraints, a Python
gold table), run through Dagster from its landing sensor: the tables, checks, verify and the
quarantine treat it as they treat the reference tables."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_assets.assets
import lakehouse_assets_tests.admissions
from lakehouse_assets.cli import main as lakehouse
from lakehouse_assets.definitions import build_definitions
from lakehouse_assets.reliability import check_all, declared_flows
from lakehouse_assets.reliability.invariants import GOLD_RECOMPUTED, LANDED_ONCE, ROUTED
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.assets.pipeline import current_resources

HEADER = "admission_id,ward,admitted,discharged"
FILES = {
    "2026-11-01.csv": [
        "1,cardiology,2026-11-01 08:00:00,2026-11-02 08:00:00",
        "2,oncology,2026-11-01 09:00:00,2026-11-01 21:00:00",
        "3,,2026-11-01 10:00:00,2026-11-01 12:00:00",  # no ward: dropped
    ],
    "2026-11-02.csv": [
        "4,cardiology,2026-11-02 07:00:00,2026-11-02 13:00:00",
        "5,oncology,2026-11-02 09:00:00,2026-11-01 09:00:00",  # discharged before admitted: dropped
        "6,oncology,2026-11-02 10:00:00,2026-11-03 10:00:00",
    ],
}
KEPT = {1: ("cardiology", 24.0), 2: ("oncology", 12.0), 4: ("cardiology", 6.0), 6: ("oncology", 24.0)}
DROPPED = {3: "has_ward", 5: "discharged_after_admitted"}


def land_admissions(landing: Path) -> None:
    """Each file as landed a minute ago: settled, so the sensor's first tick announces it."""
    landing.mkdir(parents=True, exist_ok=True)
    settled = time.time() - 60
    for name, rows in FILES.items():
        (landing / name).write_text("\n".join([HEADER, *rows]) + "\n")
        os.utime(landing / name, (settled, settled))


def rows(settings: LakehouseSettings, layer: str, name: str) -> list[dict]:
    return DeltaTable(str(settings.table_path(layer, name))).to_pyarrow_table().to_pylist()


@pytest.fixture(scope="module")
def definitions() -> dg.Definitions:
    return build_definitions(lakehouse_assets.assets, lakehouse_assets_tests.admissions)


@pytest.fixture(scope="module")
def materialized(spark, definitions, tmp_path_factory) -> Iterator[tuple[LakehouseSettings, dg.ExecuteInProcessResult]]:
    """The admissions landed, then the run the landing sensor requests for them (read only)."""
    root = tmp_path_factory.mktemp("admissions") / "lakehouse"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAKEHOUSE_ROOT", str(root))
        settings = LakehouseSettings.from_env()
        land_admissions(Path(settings.landing_path("admissions")))
        repository = definitions.get_repository_def()
        sensor = repository.get_sensor_def("landing_admissions_sensor")
        resources = current_resources()
        with dg.build_sensor_context(definitions=definitions, resources=resources) as context:
            tick = sensor.evaluate_tick(context)
        [request] = tick.run_requests or []
        result = dg.materialize([*(definitions.assets or []), *(definitions.asset_checks or [])],
                                selection=list(request.asset_selection or []),
                                resources=resources, instance=dg.DagsterInstance.ephemeral(),
                                raise_on_error=True, tags=request.tags)
        yield settings, result


@pytest.mark.slow
def test_the_landing_sensor_carries_a_new_source_to_its_gold(materialized) -> None:
    settings, result = materialized

    assert result.success
    assert {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()} >= {
        "bronze/admissions", "silver/admissions_clean", "silver/admissions_clean_quarantine", "gold/ward_stays",
        "gold/ward_days"}
    clean = {r["admission_id"]: (r["ward"], r["length_of_stay_hours"]) for r in rows(settings, "silver", "admissions_clean")}
    assert clean == KEPT
    stays = {r["ward"]: (r["admissions"], r["mean_stay_hours"]) for r in rows(settings, "gold", "ward_stays")}
    assert stays == {ward: (len(hours), statistics.mean(hours)) for ward in ("cardiology", "oncology")
                     for hours in [[h for w, h in KEPT.values() if w == ward]]}


@pytest.mark.slow
def test_a_new_sources_checks_pass_and_quarantine_says_why(materialized) -> None:
    settings, result = materialized

    evaluations = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations[("silver/admissions_clean", "declared_schema")]
    assert evaluations[("gold/ward_stays", "declared_schema")]
    assert evaluations[("gold/ward_stays", "data_freshness")]
    quarantined = {r["admission_id"]: r["_quarantine_reason"] for r in rows(settings, "silver", "admissions_clean_quarantine")}
    assert set(quarantined) == set(DROPPED)
    assert all(DROPPED[admission] in reason for admission, reason in quarantined.items()), quarantined


@pytest.mark.slow
def test_verify_checks_a_new_source_and_fails_when_its_quarantine_loses_a_row(materialized, definitions, tmp_path,
                                                                              monkeypatch, capsys) -> None:
    import shutil

    settings, _ = materialized
    flows = declared_flows(definitions.assets or [])
    report = check_all(LakehouseResource.from_settings(settings), flows=flows)
    assert report.ok, report.summary()
    assert "bronze.admissions" in report.result(LANDED_ONCE).checked
    assert "silver.admissions_clean" in report.result(ROUTED).checked
    assert "gold.ward_days" in report.result(GOLD_RECOMPUTED).checked
    # The command finds the package through LAKEHOUSE_ASSET_PACKAGES, as a user's would be.
    copy = tmp_path / "lakehouse"
    shutil.copytree(settings.root, copy)
    monkeypatch.setenv("LAKEHOUSE_ASSET_PACKAGES", "lakehouse_assets_tests.admissions")
    assert lakehouse(["verify", "--root", str(copy)]) == 0
    assert "silver.admissions_clean" in capsys.readouterr().out

    quarantine = copy / "silver" / "admissions_clean_quarantine"
    kept = DeltaTable(str(quarantine)).to_pyarrow_table()
    write_deltalake(str(quarantine), kept.slice(1), mode="overwrite")

    assert lakehouse(["verify", "--root", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "[routed] silver.admissions_clean: 1 bronze.admissions rows are in neither silver.admissions_clean nor " \
           "silver.admissions_clean_quarantine (lost)" in out
