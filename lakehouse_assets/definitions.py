"""The one Definitions object: assets, checks, sensors, resources and executor, in one place.

The environment is read here, once, into the lakehouse resource everything else receives
(:class:`~lakehouse_assets.resource.LakehouseResource`). Nothing here starts Spark or reads the
lakehouse: the Spark session starts lazily inside a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import dagster as dg

from lakehouse_assets.assets import maintenance
from lakehouse_assets.assets.discovery import (
    declared_types,
    freshness_paths,
    ingests_landed_files,
    package_assets,
    package_contracts,
    project_packages,
    table_specs,
)
from lakehouse_assets.assets.landing import landing_specs
from lakehouse_assets.io import DeltaIOManager
from lakehouse_assets.io.replay import replay_job, routed_table_assets
from lakehouse_assets.pipelines.assets import pipeline_assets
from lakehouse_assets.quality.checks import contract_checks
from lakehouse_assets.quality.contract import Contract
from lakehouse_assets.quality.declared_schema import declared_schema_check
from lakehouse_assets.quality.freshness import DEFAULT_MAX_LAG, freshness_check
from lakehouse_assets.resource import LAKEHOUSE_RESOURCE, LakehouseResource
from lakehouse_assets.sensors.automation import automation_sensor
from lakehouse_assets.sensors.freshness import freshness_sensor
from lakehouse_assets.sensors.landing import landing_sensors
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import IO_MANAGER_KEY, STREAM_INPUT_KEY


def table_checks(tables: Sequence[dg.AssetsDefinition],
                 contracts: Sequence[Contract]) -> list[dg.AssetChecksDefinition]:
    """Each table's schema contract as checks: its Pandera contract's where its package holds
    one, else its declared column types (``declared_schema``). ERROR checks block downstream,
    except on bronze tables (raw rows are silver's to judge)."""
    specs = table_specs(tables)
    checked = [contract for contract in contracts if contract.table in specs]
    covered = {contract.table for contract in checked}
    return [
        *(contract_checks(contract, blocking=not ingests_landed_files(specs[contract.table])) for contract in checked),
        *(declared_schema_check(table, types, blocking=not ingests_landed_files(specs[table]))
          for table, types in declared_types(tables).items() if table not in covered),
    ]


def lakehouse_resources(lakehouse: LakehouseResource) -> dict[str, Any]:
    """The resources every table asset, check, sensor and job uses: ``lakehouse``, and the Delta
    IO manager over it (writing outputs; loading inputs as batches, or as streams)."""
    return {
        LAKEHOUSE_RESOURCE: lakehouse,
        IO_MANAGER_KEY: DeltaIOManager(lakehouse=lakehouse),
        STREAM_INPUT_KEY: DeltaIOManager(lakehouse=lakehouse, read_inputs_as="stream"),
    }


def build_definitions(*packages: ModuleType, settings: LakehouseSettings | None = None,
                      pipelines: Sequence[Path] = ()) -> dg.Definitions:
    """The Definitions of the tables declared in ``packages`` (every module under them) and
    in the Spark Declarative Pipelines folders ``pipelines``: each table's landing folder,
    landing sensor, automation, checks and replay job come from its declaration. Nothing here
    starts Spark or reads the lakehouse."""
    settings = settings or LakehouseSettings.from_env()
    lakehouse = LakehouseResource.from_settings(settings)
    # The one setting read when definitions load: Dagster needs a sensor's interval up front.
    interval = settings.sensor_interval_seconds
    tables = [*package_assets(*packages),
              *(asset for folder in pipelines for asset in pipeline_assets(folder, settings))]
    # Each table at most 5 minutes behind the newest landed record it is made from (data
    # time): checked after each materialization, and by the freshness sensor between runs.
    paths = freshness_paths(tables)
    automated = [key for asset in tables for key, condition in asset.automation_conditions_by_key.items()
                 if condition is not None]
    return dg.Definitions(
        assets=[*landing_specs(tables), *tables],
        asset_checks=[*table_checks(tables, package_contracts(*packages)),
                      *(freshness_check(path, DEFAULT_MAX_LAG) for path in paths)],
        sensors=[
            *landing_sensors(tables, minimum_interval_seconds=interval),
            automation_sensor(dg.AssetSelection.assets(*automated), minimum_interval_seconds=interval),
            freshness_sensor(paths, DEFAULT_MAX_LAG),
        ],
        resources=lakehouse_resources(lakehouse),
        jobs=[maintenance.maintenance_job,
              *[replay_job(asset) for asset in routed_table_assets(tables, replayable=True).values()]],
        schedules=[maintenance.maintenance_schedule],
        executor=dg.in_process_executor,
    )


def project_definitions(settings: LakehouseSettings) -> dg.Definitions:
    """The project's own tables (``lakehouse_assets.assets``), those of the packages
    ``LAKEHOUSE_ASSET_PACKAGES`` names, and those of the pipelines ``LAKEHOUSE_PIPELINES`` names."""
    return build_definitions(*project_packages(settings.asset_packages), settings=settings,
                             pipelines=settings.pipelines)


defs = project_definitions(LakehouseSettings.from_env())
