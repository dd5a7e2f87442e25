"""Contender 2: plain PySpark Structured Streaming, as a user would hand-write the course's
pipeline without Delta: three chained ``availableNow`` queries, each with its checkpoint.

- bronze: the JSON files as they land (explicit schema, plus the source file and receipt
  time, as the course's bronze adds), into a Parquet file sink;
- silver: a stream over bronze's Parquet sink, joined with the patients CSV (static),
  ``heartrate > 0``, ``time`` as a timestamp, into a Parquet file sink;
- gold: a stream over silver, the daily average per patient in complete mode, written with
  ``foreachBatch`` (Parquet's file sink does not take complete mode) as an overwrite.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from benchmarks.contenders import PYTHON, Workspace, base_env


def command(ws: Workspace, **_: str) -> tuple[list[str], dict[str, str]]:
    return [PYTHON, "-m", "benchmarks.contenders.plain_streaming", str(ws.root)], base_env()


def main(root: Path) -> int:
    from benchmarks.measure import Phases

    phases = Phases()
    phases.mark("child_start")
    from pyspark.sql import functions  # noqa: F401 - the queries' imports count as imports, as before

    from benchmarks.contenders._spark import plain_session

    phases.mark("imported")
    spark = plain_session("plain_streaming")
    phases.mark("session_started")
    run_pipeline(spark, root, phases)
    spark.stop()
    phases.mark("session_stopped")
    return 0


def run_pipeline(spark, root: Path, phases) -> None:  # noqa: ANN001 - SparkSession, Phases
    """The three queries over the lakehouse at ``root``, on ``spark``; marks each one's end.
    Also what the warm variant (:mod:`plain_streaming_warm`) runs on its long-lived session."""
    from pyspark.sql import functions as F

    from benchmarks.contenders._spark import BRONZE_SCHEMA, PATIENTS_SCHEMA, RAW_SCHEMA, SILVER_SCHEMA

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


def _run(writer, path: str | None, queries: dict[str, dict], name: str) -> None:  # noqa: ANN001
    from benchmarks.contenders._profile import progress_summary

    started = time.monotonic()
    writer = writer.trigger(availableNow=True)
    query = writer.start(path) if path is not None else writer.start()
    query.awaitTermination()
    queries[name] = {"seconds": round(time.monotonic() - started, 3), **progress_summary(query.recentProgress)}


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
