"""The seeds' heart-rate pipeline in Lakeflow's Python API: Auto Loader bronze, the patients
lookup, silver with expectations (rows failing one are dropped, into the quarantine here),
and the daily average as a materialized view.

`lakehouse.landing` is the lakehouse's landing folder, which it adds to every pipeline's
configuration; under `spark-pipelines` set it in the spec's configuration."""

from pyspark import pipelines as dp
from pyspark.sql import functions as F

LANDING = spark.conf.get("lakehouse.landing")  # noqa: F821 (spark is the pipeline's session)


@dp.table(comment="Heart-rate recordings as landed, with _rescued_data for whatever did not fit.")
def recordings_bronze():
    return (
        spark.readStream.format("cloudFiles")  # noqa: F821
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaHints", "time DOUBLE, heartrate DOUBLE, mrn BIGINT, device_id BIGINT")
        .option("cloudFiles.inferColumnTypes", "true")
        .load(f"{LANDING}/recordings")
    )


@dp.materialized_view(comment="The patients lookup (mrn, name).")
def patients():
    return spark.read.csv(f"{LANDING}/patients", header=True, schema="mrn BIGINT, name STRING")  # noqa: F821


@dp.table(comment="Recordings of known patients with their names, time as a timestamp, heart rates in (0, 300].")
@dp.expect_or_drop("known_patient", "name IS NOT NULL")
@dp.expect_or_drop("mrn_positive", "mrn > 0")
@dp.expect_or_drop("heartrate_positive", "heartrate > 0")
@dp.expect_or_drop("heartrate_in_range", "heartrate <= 300")
@dp.expect_or_drop("time_plausible", "time >= TIMESTAMP'2000-01-01' AND time <= current_timestamp() + INTERVAL 1 DAY")
@dp.expect("device_id_present", "device_id IS NOT NULL")
def recordings_enriched():
    patients = spark.read.table("patients")  # noqa: F821
    return (
        spark.readStream.table("recordings_bronze").alias("a")  # noqa: F821
        .join(patients.alias("b"), F.col("a.mrn") == F.col("b.mrn"), "left")
        .select(
            F.col("a.device_id").alias("device_id"), F.col("a.mrn").alias("mrn"), F.col("b.name").alias("name"),
            F.from_unixtime(F.col("a.time"), "yyyy-MM-dd HH:mm:ss").cast("timestamp").alias("time"),
            F.col("a.heartrate").alias("heartrate"),
        )
    )


@dp.materialized_view(comment="Average heart rate per patient and day.")
def daily_patient_avg():
    return (
        spark.read.table("recordings_enriched")  # noqa: F821
        .groupBy("mrn", "name", F.date_trunc("DD", "time").alias("date"))
        .agg(F.mean("heartrate").alias("avg_heartrate"))
    )


@dp.materialized_view(comment="Recordings per device, counted from bronze.")
def device_counts():
    return (
        spark.read.table("recordings_bronze")  # noqa: F821
        .where("device_id IS NOT NULL")
        .groupBy("device_id")
        .agg(F.count("device_id").alias("total_recordings"))
    )
