"""The reference pipeline as Spark Declarative Pipelines: streaming tables for bronze and
silver, a materialized view for gold. ``spark-pipelines run`` imports this file with ``spark``
defined; the landing folder comes from the environment (``BENCH_SDP_LANDING``)."""

import os

from pyspark import pipelines as dp
from pyspark.sql import functions as F

LANDING = os.environ["BENCH_SDP_LANDING"]
RAW_SCHEMA = "device_id BIGINT, mrn BIGINT, time DOUBLE, heartrate DOUBLE"
PATIENTS_SCHEMA = "mrn BIGINT, name STRING"


@dp.table(name="recordings_bronze", comment="Recordings as landed")
def recordings_bronze():
    return (
        spark.readStream.schema(RAW_SCHEMA).json(f"{LANDING}/recordings")  # noqa: F821
        .select("*", F.col("_metadata.file_path").alias("source_file"), F.current_timestamp().alias("receipt_time"))
    )


@dp.table(name="recordings_enriched", comment="Recordings with patient names, heartrate > 0")
def recordings_enriched():
    patients = spark.read.csv(f"{LANDING}/patients", header=True, schema=PATIENTS_SCHEMA)  # noqa: F821
    return (
        spark.readStream.table("recordings_bronze").alias("a")  # noqa: F821
        .join(patients.alias("b"), F.col("a.mrn") == F.col("b.mrn"))
        .where(F.col("a.heartrate") > 0)
        .select(
            F.col("a.device_id").alias("device_id"), F.col("a.mrn").alias("mrn"), F.col("b.name").alias("name"),
            F.from_unixtime(F.col("a.time"), "yyyy-MM-dd HH:mm:ss").cast("timestamp").alias("time"),
            F.col("a.heartrate").alias("heartrate"),
        )
    )


@dp.materialized_view(name="daily_patient_avg", comment="Average heart rate per patient and day")
def daily_patient_avg():
    return (
        spark.read.table("recordings_enriched")  # noqa: F821
        .groupBy("mrn", "name", F.date_trunc("DD", "time").alias("date"))
        .agg(F.mean("heartrate").alias("avg_heartrate"))
    )
