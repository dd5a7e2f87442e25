"""Silver: validated, enriched recordings and the patients lookup."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.sensors.automation import downstream_of_new_data
from lakehouse_assets.assets.table_asset import ColumnSource, batch_from, stream_from, table_asset
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark import SparkResource

PATIENTS_SCHEMA = "mrn BIGINT, name STRING"


@table_asset(
    automation_condition=downstream_of_new_data(),
    layer="silver",
    deps=[["landing", "patients"]],
    write_mode="overwrite",
)
def patients(spark: SparkResource) -> DataFrame:
    """The patients lookup (mrn, name), loaded in batch from the landed CSV."""
    landing = LakehouseSettings.from_env().landing_path("patients")
    return spark.spark_session.read.csv(str(landing), header=True, schema=PATIENTS_SCHEMA)


@table_asset(
    automation_condition=downstream_of_new_data(),
    layer="silver",
    ins={
        "recordings": stream_from(["bronze", "recordings"]),
        "patients": batch_from(["silver", "patients"]),
    },
    output_mode="append",
    column_lineage={
        "device_id": [ColumnSource("bronze.recordings", "device_id")],
        "mrn": [ColumnSource("bronze.recordings", "mrn"), ColumnSource("silver.patients", "mrn")],
        "name": [ColumnSource("silver.patients", "name")],
        "time": [ColumnSource("bronze.recordings", "time")],
        "heartrate": [ColumnSource("bronze.recordings", "heartrate")],
    },
)
def recordings_enriched(recordings: DataFrame, patients: DataFrame) -> DataFrame:
    """Recordings joined with patient names, `time` as a timestamp, only heart rates above 0."""
    return (
        recordings.alias("a")
        .join(patients.alias("b"), F.col("a.mrn") == F.col("b.mrn"))
        .where(F.col("a.heartrate") > 0)
        .select(
            F.col("a.device_id").alias("device_id"),
            F.col("a.mrn").alias("mrn"),
            F.col("b.name").alias("name"),
            F.from_unixtime(F.col("a.time"), "yyyy-MM-dd HH:mm:ss").cast("timestamp").alias("time"),
            F.col("a.heartrate").alias("heartrate"),
        )
    )
