"""Contender 3: plain PySpark batch, the same logic as one batch job over every landed file:
the floor for this work on this machine. It keeps no state, so every run recomputes
everything (bronze, silver and gold as Delta tables, overwritten, read back by Delta Lake's
connector: the same session as :mod:`plain_streaming`'s)."""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.contenders import PYTHON, Workspace, base_env


def command(ws: Workspace, **_: str) -> tuple[list[str], dict[str, str]]:
    return [PYTHON, "-m", "benchmarks.contenders.plain_batch", str(ws.root)], base_env()


def main(root: Path) -> int:
    from benchmarks.measure import Phases

    phases = Phases()
    phases.mark("child_start")
    from pyspark.sql import functions as F

    from benchmarks.contenders._spark import PATIENTS_SCHEMA, RAW_SCHEMA, plain_session

    phases.mark("imported")
    spark = plain_session("plain_batch")
    phases.mark("session_started")
    landing = root / "landing"
    bronze_path, silver_path, gold_path = (str(root / p) for p in ("bronze", "silver", "gold"))

    (
        spark.read.schema(RAW_SCHEMA).json(str(landing / "recordings"))
        .select("*", F.col("_metadata.file_path").alias("source_file"), F.current_timestamp().alias("receipt_time"))
        .write.format("delta").mode("overwrite").save(bronze_path)
    )
    phases.mark("bronze_done")
    patients = spark.read.csv(str(landing / "patients"), header=True, schema=PATIENTS_SCHEMA)
    (
        spark.read.format("delta").load(bronze_path).alias("a")
        .join(patients.alias("b"), F.col("a.mrn") == F.col("b.mrn"))
        .where(F.col("a.heartrate") > 0)
        .select(
            F.col("a.device_id").alias("device_id"), F.col("a.mrn").alias("mrn"), F.col("b.name").alias("name"),
            F.from_unixtime(F.col("a.time"), "yyyy-MM-dd HH:mm:ss").cast("timestamp").alias("time"),
            F.col("a.heartrate").alias("heartrate"),
        )
        .write.format("delta").mode("overwrite").save(silver_path)
    )
    phases.mark("silver_done")
    (
        spark.read.format("delta").load(silver_path)
        .groupBy("mrn", "name", F.date_trunc("DD", "time").alias("date"))
        .agg(F.mean("heartrate").alias("avg_heartrate"))
        .write.format("delta").mode("overwrite").save(gold_path)
    )
    phases.mark("gold_done")
    spark.stop()
    phases.mark("session_stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
