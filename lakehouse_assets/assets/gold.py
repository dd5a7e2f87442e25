"""Gold: aggregates for reporting, recomputed in complete mode from their streams' state."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.assets.automation import downstream_of_new_data
from lakehouse_assets.assets.table_asset import ColumnSource, stream_from, table_asset


@table_asset(
    automation_condition=downstream_of_new_data(),
    layer="gold",
    ins={"recordings": stream_from(["silver", "recordings_enriched"])},
    output_mode="complete",
    column_lineage={
        "mrn": [ColumnSource("silver.recordings_enriched", "mrn")],
        "name": [ColumnSource("silver.recordings_enriched", "name")],
        "avg_heartrate": [ColumnSource("silver.recordings_enriched", "heartrate")],
        "date": [ColumnSource("silver.recordings_enriched", "time")],
    },
)
def daily_patient_avg(recordings: DataFrame) -> DataFrame:
    """Average heart rate per patient and day."""
    return (
        recordings.groupBy("mrn", "name", F.date_trunc("DD", "time").alias("date"))
        .agg(F.mean("heartrate").alias("avg_heartrate"))
        .select("mrn", "name", "avg_heartrate", "date")
    )


@table_asset(
    automation_condition=downstream_of_new_data(),
    layer="gold",
    ins={"recordings": stream_from(["bronze", "recordings"])},
    output_mode="complete",
    column_lineage={
        "device_id": [ColumnSource("bronze.recordings", "device_id")],
        "total_recordings": [ColumnSource("bronze.recordings", "device_id")],
    },
)
def device_counts(recordings: DataFrame) -> DataFrame:
    """Recordings per device, counted from bronze as in the course (records with no
    device_id, e.g. malformed lines, belong to no device)."""
    return (
        recordings.where(F.col("device_id").isNotNull())
        .groupBy("device_id")
        .agg(F.count("device_id").alias("total_recordings"))
    )
