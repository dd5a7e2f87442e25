"""Contender 2: plain PySpark Structured Streaming with Delta Lake, as a user would hand-write
the course's pipeline on this lakehouse: three chained ``availableNow`` queries, each with its
checkpoint, every table a Delta table written and read by Delta Lake's own connector
(delta-spark, the jars ``make install`` resolved; see :mod:`._spark`).

- bronze: the JSON files as they land (Spark's file stream source, the open-source stand-in
  for Auto Loader: explicit schema, plus the source file and receipt time, as the course's
  bronze adds), appended to a Delta table (``writeStream.format("delta")``);
- silver: a Delta stream over bronze (``readStream.format("delta").load(path)``), joined with
  the patients CSV (static), ``heartrate > 0``, ``time`` as a timestamp, appended to a Delta
  table;
- gold: a Delta stream over silver, the daily average per patient, written by Delta's sink in
  complete mode (each batch overwrites the table in one commit).

Cold: a fresh process each run, its own SparkSession. :mod:`plain_streaming_warm` runs the
same queries (:func:`run_pipeline`) in one long-lived session.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.contenders import PYTHON, Workspace, base_env

#: The tables and checkpoints under a contender's lakehouse root.
TABLES = ("bronze", "silver", "gold")
CHECKPOINTS = "_checkpoints"


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

    from benchmarks.contenders._spark import PATIENTS_SCHEMA, RAW_SCHEMA, run_available_now

    landing = root / "landing"
    checkpoints = root / CHECKPOINTS
    bronze_path, silver_path, gold_path = (str(root / p) for p in TABLES)
    rows: dict[str, dict] = {}

    bronze = (
        spark.readStream.schema(RAW_SCHEMA).json(str(landing / "recordings"))
        .select("*", F.col("_metadata.file_path").alias("source_file"), F.current_timestamp().alias("receipt_time"))
    )
    run_available_now(
        bronze.writeStream.format("delta").outputMode("append").option("checkpointLocation", str(checkpoints / "bronze")),
        bronze_path, rows, "bronze",
    )
    phases.mark("bronze_done")

    patients = spark.read.csv(str(landing / "patients"), header=True, schema=PATIENTS_SCHEMA)
    silver = (
        spark.readStream.format("delta").load(bronze_path).alias("a")
        .join(patients.alias("b"), F.col("a.mrn") == F.col("b.mrn"))
        .where(F.col("a.heartrate") > 0)
        .select(
            F.col("a.device_id").alias("device_id"), F.col("a.mrn").alias("mrn"), F.col("b.name").alias("name"),
            F.from_unixtime(F.col("a.time"), "yyyy-MM-dd HH:mm:ss").cast("timestamp").alias("time"),
            F.col("a.heartrate").alias("heartrate"),
        )
    )
    run_available_now(
        silver.writeStream.format("delta").outputMode("append").option("checkpointLocation", str(checkpoints / "silver")),
        silver_path, rows, "silver",
    )
    phases.mark("silver_done")

    gold = (
        spark.readStream.format("delta").load(silver_path)
        .groupBy("mrn", "name", F.date_trunc("DD", "time").alias("date"))
        .agg(F.mean("heartrate").alias("avg_heartrate"))
    )
    run_available_now(
        gold.writeStream.format("delta").outputMode("complete").option("checkpointLocation", str(checkpoints / "gold")),
        gold_path, rows, "gold",
    )
    phases.mark("gold_done")
    phases.value("queries", rows)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
