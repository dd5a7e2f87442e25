"""Silver: validated, enriched recordings and the patients lookup."""

from __future__ import annotations

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.assets.automation import downstream_of_new_data
from lakehouse_assets.assets.table_asset import (
    ColumnSource,
    RoutedRows,
    batch_from,
    routed_table_asset,
    stream_from,
    table_asset,
)
from lakehouse_assets.ingestion.lookup_csv import read_lookup_csv
from lakehouse_assets.quality.silver import ROUTING_RULES
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark import SparkResource

PATIENTS_SCHEMA = "mrn BIGINT, name STRING"
# The bronze `time` (Unix seconds) while the rules read the parsed timestamp as `time`.
BRONZE_TIME = "_bronze_time"


@table_asset(
    automation_condition=downstream_of_new_data(),
    layer="silver",
    deps=[["landing", "patients"]],
    write_mode="overwrite",
)
def patients(context, spark: SparkResource) -> DataFrame:  # type: ignore[no-untyped-def]
    """The patients lookup (mrn, name), loaded in batch from the landed CSV files, their
    columns matched by header name. A file lacking a column or holding a value that does not
    fit fails the load by name, and the table keeps its last good version."""
    # ``context`` is left unannotated: under postponed annotations Dagster sees a string and
    # refuses it; it is a dg.AssetExecutionContext.
    landing = LakehouseSettings.from_env().landing_path("patients")
    lookup = read_lookup_csv(spark.spark_session, landing, PATIENTS_SCHEMA)
    for message in lookup.warnings():
        context.log.warning(message)
    context.add_output_metadata({
        "files_read": dg.MetadataValue.int(len(lookup.files)),
        "columns_ignored": dg.MetadataValue.json(
            {file: list(columns) for file, columns in lookup.ignored_columns.items()}
        ),
    })
    return lookup.rows


@routed_table_asset(
    automation_condition=downstream_of_new_data(),
    layer="silver",
    name="recordings_enriched",
    quarantine_name="recordings_quarantine",
    description="Recordings of known patients with their names, `time` as a timestamp, and "
    "heart rates in (0, 300]: every routing rule passed.",
    quarantine_description="Bronze rows silver refused, as they landed, with `_quarantine_reason` "
    "naming the rules they failed (malformed records, unknown patients, heartrate <= 0, ...).",
    ins={
        "recordings": stream_from(["bronze", "recordings"]),
        "patients": batch_from(["silver", "patients"]),
    },
    expectations=ROUTING_RULES,
    column_lineage={
        "device_id": [ColumnSource("bronze.recordings", "device_id")],
        "mrn": [ColumnSource("bronze.recordings", "mrn"), ColumnSource("silver.patients", "mrn")],
        "name": [ColumnSource("silver.patients", "name")],
        "time": [ColumnSource("bronze.recordings", "time")],
        "heartrate": [ColumnSource("bronze.recordings", "heartrate")],
    },
)
def recordings_enriched(recordings: DataFrame, patients: DataFrame) -> RoutedRows:
    """The course's join of recordings with patient names, `time` parsed as a timestamp;
    the rows the course would drop (unknown patient, heartrate <= 0, ...) are quarantined."""
    bronze_columns = recordings.columns
    joined = recordings.alias("a").join(patients.alias("b"), F.col("a.mrn") == F.col("b.mrn"), "left").select(
        *[F.col(f"a.`{c}`").alias(BRONZE_TIME if c == "time" else c) for c in bronze_columns],
        F.col("b.name").alias("name"),
        F.from_unixtime(F.col("a.time"), "yyyy-MM-dd HH:mm:ss").cast("timestamp").alias("time"),
    )
    return RoutedRows(
        rows=joined,
        passed_columns=["device_id", "mrn", "name", "time", "heartrate"],
        quarantine_columns=[F.col(BRONZE_TIME).alias("time") if c == "time" else c for c in bronze_columns],
    )
