"""Contender 2b: the hand-written pipeline of :mod:`plain_streaming` without any table format:
the same three chained ``availableNow`` queries into Parquet file sinks, in a session without
Delta Lake's connector. This was ``plain_streaming`` until the lakehouse moved to Delta Lake's
Spark connector (issue 30).

Why it is kept, beside the Delta one: it is what the same script costs when neither the
session nor the queries pay for Delta (its jars and catalog at start, the transaction log read
and written by every query); ``plain_streaming`` minus this is Delta Lake's own price in a
hand-written script, which lakehouse_assets pays too and cannot remove. It is no target's
reference (those are the Delta script's) and no plan runs it unless named:
``--contenders plain_streaming,plain_streaming_parquet``.

- bronze: the JSON files as they land (explicit schema, plus the source file and receipt
  time, as the course's bronze adds), into a Parquet file sink;
- silver: a stream over bronze's Parquet sink, joined with the patients CSV (static),
  ``heartrate > 0``, ``time`` as a timestamp, into a Parquet file sink;
- gold: a stream over silver, the daily average per patient in complete mode, written with
  ``foreachBatch`` (Parquet's file sink does not take complete mode) as an overwrite.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.contenders import PYTHON, Workspace, base_env


def command(ws: Workspace, **_: str) -> tuple[list[str], dict[str, str]]:
    return [PYTHON, "-m", "benchmarks.contenders.plain_streaming_parquet", str(ws.root)], base_env()


def main(root: Path) -> int:
    from benchmarks.measure import Phases

    phases = Phases()
    phases.mark("child_start")
    from pyspark.sql import functions  # noqa: F401 - the queries' imports count as imports, as before

    from benchmarks.contenders._spark import plain_session

    phases.mark("imported")
    spark = plain_session("plain_streaming_parquet", delta=False)
    phases.mark("session_started")
    run_pipeline(spark, root, phases)
    spark.stop()
    phases.mark("session_stopped")
    return 0


def run_pipeline(spark, root: Path, phases) -> None:  # noqa: ANN001 - SparkSession, Phases
    """The three queries over the lakehouse at ``root``, on ``spark``; marks each one's end."""
    from pyspark.sql import functions as F

    from benchmarks.contenders._spark import BRONZE_SCHEMA, PATIENTS_SCHEMA, RAW_SCHEMA, SILVER_SCHEMA
    from benchmarks.contenders._spark import run_available_now as _run  # as the Delta script's queries

    landing = root / "landing"
    checkpoints = root / "_checkpoints"
    bronze_path, silver_path, gold_path = (str(root / p) for p in ("bronze", "silver", "gold"))

    bronze = (
        spark.readStream.schema(RAW_SCHEMA).json(str(landing / "recordings"))
        .select("*", F.col("_metadata.file_path").alias("source_file"), F.current_timestamp().alias("receipt_time"))
    )
    rows: dict[str, dict] = {}
    _run(bronze.writeStream.format("parquet").option("checkpointLocation", str(checkpoints / "bronze")), bronze_path, rows, "bronze")
    phases.mark("bronze_done")

    patients = spark.read.csv(str(landing / "patients"), header=True, schema=PATIENTS_SCHEMA)
    silver = (
        spark.readStream.schema(BRONZE_SCHEMA).parquet(bronze_path).alias("a")
        .join(patients.alias("b"), F.col("a.mrn") == F.col("b.mrn"))
        .where(F.col("a.heartrate") > 0)
        .select(
            F.col("a.device_id").alias("device_id"), F.col("a.mrn").alias("mrn"), F.col("b.name").alias("name"),
            F.from_unixtime(F.col("a.time"), "yyyy-MM-dd HH:mm:ss").cast("timestamp").alias("time"),
            F.col("a.heartrate").alias("heartrate"),
        )
    )
    _run(silver.writeStream.format("parquet").option("checkpointLocation", str(checkpoints / "silver")), silver_path, rows, "silver")
    phases.mark("silver_done")

    gold = (
        spark.readStream.schema(SILVER_SCHEMA).parquet(silver_path)
        .groupBy("mrn", "name", F.date_trunc("DD", "time").alias("date"))
        .agg(F.mean("heartrate").alias("avg_heartrate"))
    )

    def overwrite(batch, _batch_id):  # noqa: ANN001
        batch.write.mode("overwrite").parquet(gold_path)

    _run(
        gold.writeStream.outputMode("complete").foreachBatch(overwrite)
        .option("checkpointLocation", str(checkpoints / "gold")),
        None, rows, "gold",
    )
    phases.mark("gold_done")
    phases.value("queries", rows)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
