"""The one Definitions object: assets, checks, sensors, resources and executor, in one place.

Nothing here starts Spark or reads the lakehouse: the Spark session starts lazily inside a
run, and paths are read from the environment when a run or sensor tick needs them.
"""

from __future__ import annotations

import dagster as dg

from lakehouse_assets.assets import bronze, gold, landing, maintenance, silver
from lakehouse_assets.assets.table_asset import IO_MANAGER_KEY, STREAM_INPUT_KEY
from lakehouse_assets.io import DeltaIOManager
from lakehouse_assets.io.replay import replay_job, routed_table_assets
from lakehouse_assets.quality import bronze as bronze_contracts
from lakehouse_assets.quality import gold as gold_contracts
from lakehouse_assets.quality import silver as silver_contracts
from lakehouse_assets.quality.checks import contract_checks
from lakehouse_assets.quality.freshness import DEFAULT_MAX_LAG, freshness_check
from lakehouse_assets.sensors.automation import automation_sensor
from lakehouse_assets.sensors.freshness import freshness_sensor
from lakehouse_assets.sensors.landing import landing_sensor
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark import SparkResource

_spark = SparkResource()
# The one setting read when definitions load: Dagster needs a sensor's interval up front.
_sensor_interval = LakehouseSettings.from_env().sensor_interval_seconds

table_assets = dg.load_assets_from_modules([bronze, silver, gold])

# Silver and gold checks block: a failing ERROR rule keeps downstream from building on it.
table_checks = [
    contract_checks(bronze_contracts.RECORDINGS, blocking=False),
    contract_checks(silver_contracts.PATIENTS),
    contract_checks(silver_contracts.RECORDINGS_ENRICHED),
    contract_checks(silver_contracts.RECORDINGS_QUARANTINE),
    contract_checks(gold_contracts.DAILY_PATIENT_AVG),
    contract_checks(gold_contracts.DEVICE_COUNTS),
]
# Gold at most 5 minutes behind the newest landed record (data time): checked after each
# materialization, and by the freshness sensor between runs.
freshness_checks = [freshness_check(path, DEFAULT_MAX_LAG) for path in gold.FRESHNESS_PATHS]

defs = dg.Definitions(
    assets=[landing.recordings, landing.patients, landing.patient_changes, landing.patient_snapshots,
            *table_assets],
    asset_checks=[*table_checks, *freshness_checks],
    sensors=[
        landing_sensor(source="recordings", target=bronze.recordings.key, minimum_interval_seconds=_sensor_interval),
        landing_sensor(source="patients", target=silver.patients.key, minimum_interval_seconds=_sensor_interval),
        landing_sensor(source="patient_changes", target=bronze.patient_changes.key,
                       minimum_interval_seconds=_sensor_interval),
        landing_sensor(source="patient_snapshots", target=silver.patients_snapshot_history.key,
                       minimum_interval_seconds=_sensor_interval),
        automation_sensor(dg.AssetSelection.groups("silver", "gold"), minimum_interval_seconds=_sensor_interval),
        freshness_sensor(gold.FRESHNESS_PATHS, DEFAULT_MAX_LAG),
    ],
    resources={
        "spark": _spark,
        IO_MANAGER_KEY: DeltaIOManager(spark=_spark),
        STREAM_INPUT_KEY: DeltaIOManager(spark=_spark, read_inputs_as="stream"),
    },
    jobs=[maintenance.maintenance_job, *[replay_job(asset) for asset in routed_table_assets(table_assets).values()]],
    schedules=[maintenance.maintenance_schedule],
    executor=dg.in_process_executor,
)
