"""Running the reference pipeline in tests, and computing what it should produce another way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.settings import LakehouseSettings

RAW_SCHEMA = "device_id BIGINT, mrn BIGINT, time DOUBLE, heartrate DOUBLE"


#: The seeds' pipeline: recordings and the patients lookup from bronze to the seeds' two gold
#: tables, quarantine included; what tests that land recordings and patients materialize.
#: The tables added since (the change flow, windowed gold) have tests of their own.
SEED_TABLES = ("bronze/recordings", "silver/patients", "silver/recordings_enriched", "silver/recordings_quarantine",
               "gold/daily_patient_avg", "gold/device_counts")
SEED_PIPELINE = dg.AssetSelection.assets(*[dg.AssetKey(key.split("/")) for key in SEED_TABLES])


def tables(*keys: str) -> dg.AssetSelection:
    """The tables ``layer/name`` without their checks (a quarter of a run's time): for tests
    that assert nothing of the checks, which have tests of their own."""
    return dg.AssetSelection.assets(*[dg.AssetKey(key.split("/")) for key in keys]).without_checks()


SEED_WITHOUT_CHECKS = tables(*SEED_TABLES)
#: The recordings from landing to silver and its quarantine (the lookup as it stands): for
#: tests of what silver keeps and refuses.
TO_SILVER = tables("bronze/recordings", "silver/recordings_enriched", "silver/recordings_quarantine")


def current_resources() -> dict[str, Any]:
    """The project's resources for the lakehouse the environment names now (a test points
    ``LAKEHOUSE_ROOT`` at its own): the definitions built theirs when first imported."""
    from lakehouse_assets.definitions import lakehouse_resources
    from lakehouse_assets.resource import LakehouseResource

    return lakehouse_resources(LakehouseResource.from_settings(LakehouseSettings.from_env()))


def materialize(selection: str | Sequence[str] | dg.AssetSelection = "*", *, instance: dg.DagsterInstance | None = None,
                run_config: dict[str, Any] | None = None, definitions: dg.Definitions | None = None,
                raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
    """Materialize assets of the project's own Definitions (or of ``definitions``: declared
    packages and pipelines loaded beside them), as the UI would."""
    from lakehouse_assets.definitions import defs as project

    defs = definitions or project
    return dg.materialize(
        [*(defs.assets or []), *(defs.asset_checks or [])],
        selection=selection,
        resources=dict(defs.resources or {}) if definitions else current_resources(),
        instance=instance or dg.DagsterInstance.ephemeral(),
        run_config=run_config,
        raise_on_error=raise_on_error,
    )


def run_job(name: str, *, instance: dg.DagsterInstance | None = None,
            raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
    """Run the project's job ``name`` (e.g. a quarantine replay), as the UI would."""
    from lakehouse_assets.definitions import defs

    return defs.resolve_job_def(name).execute_in_process(instance=instance or dg.DagsterInstance.ephemeral(),
                                                         resources=current_resources(),
                                                         raise_on_error=raise_on_error)


def materialize_alone(*assets: dg.AssetsDefinition, upstream: dg.AssetKey,
                      raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
    """Materialize ``assets`` (tables a test declares) with the project's IO managers, their
    ``upstream`` table present as an external asset."""
    from lakehouse_assets.io import DeltaIOManager
    from lakehouse_assets.resource import LakehouseResource
    from lakehouse_assets.spec import IO_MANAGER_KEY, STREAM_INPUT_KEY

    spark = LakehouseResource.from_settings(LakehouseSettings.from_env())
    return dg.materialize(
        [*assets, dg.AssetSpec(upstream).with_io_manager_key(IO_MANAGER_KEY)],
        selection=[key for a in assets for key in a.keys],
        resources={"lakehouse": spark, IO_MANAGER_KEY: DeltaIOManager(lakehouse=spark),
                   STREAM_INPUT_KEY: DeltaIOManager(lakehouse=spark, read_inputs_as="stream")},
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=raise_on_error,
    )


def materialization_metadata(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    """Per asset (``layer/name``), the metadata of its materialization in this run."""
    found = {}
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        assert materialization is not None
        found[materialization.asset_key.to_user_string()] = {
            key: getattr(value, "value", value) for key, value in materialization.metadata.items()
        }
    return found


def observation_metadata(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    """Per asset (``layer/name``), the metadata of what this run observed of it without writing
    it (why it was not written, the version it stands at)."""
    return {event.asset_observation_data.asset_observation.asset_key.to_user_string(): {
        key: getattr(value, "value", value)
        for key, value in event.asset_observation_data.asset_observation.metadata.items()}
        for event in result.get_asset_observation_events()}


def delta_rows(settings: LakehouseSettings, layer: str, name: str, columns: Sequence[str],
               key: Callable[[tuple], Any] | None = None) -> list[tuple]:
    """A table's rows as read by delta-rs alone, sorted (by ``key``: ``repr`` for rows holding
    nulls): the independent reader."""
    path = Path(settings.table_path(layer, name))
    # An explicit local file system: delta-rs' default one can crash the process at exit.
    dataset = DeltaTable(str(path)).to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem()))
    table = dataset.to_table(columns=list(columns))
    return sorted(_normalise(table), key=key)


def spark_rows(df: DataFrame, columns: Sequence[str]) -> list[tuple]:
    return sorted(_normalise(df.select(*columns).toArrow()))


def _normalise(table: pa.Table) -> list[tuple]:
    rows = []
    for record in table.to_pylist():
        rows.append(tuple(round(v, 9) if isinstance(v, float) else v for v in record.values()))
    return rows


def expected_outputs(spark: SparkSession, landing: Path) -> dict[str, DataFrame]:
    """The course's queries as one batch job over every landed file."""
    recordings = spark.read.schema(RAW_SCHEMA).json(str(landing / "recordings"))
    patients = spark.read.csv(str(landing / "patients"), header=True, schema="mrn BIGINT, name STRING")
    enriched = (
        recordings.join(patients, "mrn")
        .where("heartrate > 0")
        .select(
            "device_id", "mrn", "name",
            F.from_unixtime("time", "yyyy-MM-dd HH:mm:ss").cast("timestamp").alias("time"),
            "heartrate",
        )
    )
    daily = enriched.groupBy("mrn", "name", F.date_trunc("DD", "time").alias("date")).agg(
        F.mean("heartrate").alias("avg_heartrate")
    )
    counts = recordings.where("device_id IS NOT NULL").groupBy("device_id").agg(F.count("device_id").alias("total_recordings"))
    return {"recordings": recordings, "recordings_enriched": enriched, "daily_patient_avg": daily, "device_counts": counts}
