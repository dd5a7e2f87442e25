"""A new source declared once is fully wired: its landing asset, landing sensor, automation,
checks, freshness and replay job all come from its declarations (the admissions package)."""

from __future__ import annotations

import dagster as dg
import pytest

import lakehouse_assets.assets
import lakehouse_assets_tests.admissions
from lakehouse_assets.definitions import build_definitions
from lakehouse_assets.quality.declared_schema import DECLARED_SCHEMA_CHECK
from lakehouse_assets.quality.freshness import FRESHNESS_CHECK


@pytest.fixture(scope="module")
def repository() -> dg.RepositoryDefinition:
    return build_definitions(lakehouse_assets.assets, lakehouse_assets_tests.admissions).get_repository_def()


def key(path: str) -> dg.AssetKey:
    return dg.AssetKey(path.split("/"))


def test_every_module_of_a_package_is_found_without_listing_it(repository: dg.RepositoryDefinition) -> None:
    keys = repository.asset_graph.get_all_asset_keys()
    assert {key("bronze/admissions"), key("silver/admissions_clean"), key("silver/admissions_clean_quarantine"),
            key("gold/ward_stays")} <= keys
    assert key("gold/daily_patient_avg") in keys  # the project's own tables stay


def test_a_bronze_declaration_gives_its_landing_folder_a_described_asset(repository: dg.RepositoryDefinition) -> None:
    landing = repository.asset_graph.get(key("landing/admissions"))
    assert landing.group_name == "landing"
    assert not landing.is_materializable
    assert "Ward admissions as CSV" in (landing.description or "")
    assert "$LAKEHOUSE_ROOT/landing/admissions/" in (landing.description or "")
    assert {"csv", "files"} <= set(landing.kinds)
    assert key("landing/admissions") in repository.asset_graph.get(key("bronze/admissions")).parent_keys


def test_a_folder_read_without_a_declared_description_is_named_by_its_reader() -> None:
    from lakehouse_assets.assets.landing import landing_specs

    @dg.asset(key=["silver", "wards"], deps=[["landing", "wards"]])
    def wards() -> None:
        """Reads landing/wards in batch, declaring nothing about it."""

    (spec,) = landing_specs([wards])
    assert spec.key == key("landing/wards")
    assert spec.description == "Files landing at $LAKEHOUSE_ROOT/landing/wards/, read by silver/wards."


def test_the_landing_sensor_of_a_new_source_requests_its_bronze_and_everything_below(
        repository: dg.RepositoryDefinition) -> None:
    sensor = repository.get_sensor_def("landing_admissions_sensor")
    selected = sensor.asset_selection.resolve(repository.asset_graph) if sensor.asset_selection else set()
    assert {key("bronze/admissions"), key("silver/admissions_clean"), key("silver/admissions_clean_quarantine"),
            key("gold/ward_stays")} <= selected
    assert key("gold/daily_patient_avg") not in selected


def test_the_automation_sensor_covers_the_new_tables_with_conditions(repository: dg.RepositoryDefinition) -> None:
    automation = next(s for s in repository.sensor_defs if isinstance(s, dg.AutomationConditionSensorDefinition))
    covered = automation.asset_selection.resolve(repository.asset_graph)
    assert {key("silver/admissions_clean"), key("gold/ward_stays")} <= covered


def test_each_table_of_a_chain_to_landed_files_gets_a_freshness_check(repository: dg.RepositoryDefinition) -> None:
    checks = repository.asset_graph.asset_check_keys
    for table in ("bronze/admissions", "silver/admissions_clean", "gold/ward_stays"):
        assert dg.AssetCheckKey(key(table), FRESHNESS_CHECK) in checks, table
    # A quarantine holds only the rows refused: it is never expected to be fresh.
    assert dg.AssetCheckKey(key("silver/admissions_clean_quarantine"), FRESHNESS_CHECK) not in checks
    # Read in batch, not through a stream's offsets: no data-time chain to follow.
    assert dg.AssetCheckKey(key("silver/patients"), FRESHNESS_CHECK) not in checks


def test_declared_column_types_become_a_schema_check(repository: dg.RepositoryDefinition) -> None:
    checks = repository.asset_graph.asset_check_keys
    assert dg.AssetCheckKey(key("silver/admissions_clean"), DECLARED_SCHEMA_CHECK) in checks
    assert dg.AssetCheckKey(key("gold/ward_stays"), DECLARED_SCHEMA_CHECK) in checks
    # Tables with a Pandera contract have its checks instead.
    assert dg.AssetCheckKey(key("gold/daily_patient_avg"), DECLARED_SCHEMA_CHECK) not in checks
    assert dg.AssetCheckKey(key("gold/daily_patient_avg"), "pandera_schema") in checks


def test_a_routed_sql_table_gets_a_replay_job(repository: dg.RepositoryDefinition) -> None:
    assert repository.has_job("quarantine_replay_silver__admissions_clean")


def test_packages_named_in_the_environment_are_loaded_beside_the_projects_own(tmp_path) -> None:
    from lakehouse_assets.definitions import project_definitions
    from lakehouse_assets.settings import LakehouseSettings

    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path),
                                           "LAKEHOUSE_ASSET_PACKAGES": "lakehouse_assets_tests.admissions"})
    keys = project_definitions(settings).get_repository_def().asset_graph.get_all_asset_keys()

    assert {key("bronze/admissions"), key("bronze/recordings")} <= keys


def test_a_package_that_cannot_be_imported_is_named(tmp_path) -> None:
    from lakehouse_assets.definitions import project_definitions
    from lakehouse_assets.errors import ConfigurationError
    from lakehouse_assets.settings import LakehouseSettings

    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path),
                                           "LAKEHOUSE_ASSET_PACKAGES": "lakehouse_assets_tests.no_such_package"})
    with pytest.raises(ConfigurationError, match="'lakehouse_assets_tests.no_such_package', which cannot be imported"):
        project_definitions(settings)
    with pytest.raises(ConfigurationError, match="importable Python packages"):
        LakehouseSettings.from_env({"LAKEHOUSE_ASSET_PACKAGES": "my-project/assets"})


def test_the_contracts_an_asset_package_holds_are_found_and_checked(repository: dg.RepositoryDefinition) -> None:
    from lakehouse_assets.assets.discovery import package_contracts

    tables = {contract.table for contract in package_contracts(lakehouse_assets.assets)}
    assert tables == {"bronze.recordings", "silver.patients", "silver.recordings_enriched",
                      "silver.recordings_quarantine", "gold.daily_patient_avg", "gold.device_counts"}
    graph = repository.asset_graph

    def blocking(table: str, check: str) -> bool:
        return graph.get_check_spec(dg.AssetCheckKey(key(table), check)).blocking

    # Raw bronze rows are silver's to judge: bronze's checks never block; the others' do.
    assert not blocking("bronze/recordings", "pandera_schema")
    assert blocking("silver/patients", "pandera_schema")
    assert blocking("silver/admissions_clean", DECLARED_SCHEMA_CHECK)
