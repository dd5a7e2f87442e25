"""A routed step on a warm engine: one ``foreachBatch`` query writing two tables, or two native flows?

    python -m benchmarks.routed_flows --rounds 6      # make bench-routed

Silver routes each bronze row to the table or to its quarantine. Issue 30 asked to measure
the two ways Delta Lake offers and pick on the engine's figures:

- ``foreachBatch``: one query; each batch is cached and appended to both tables, each append
  idempotent by Delta's ``txnAppId``/``txnVersion`` (what the project's routed sink does);
- ``two flows, in turn`` / ``two flows, together``: two native queries over the same source
  (``readStream.format("delta")`` into ``writeStream.format("delta")``), the quarantine as a
  second flow as Lakeflow builds it, run one after the other or started together;
- ``one flow``: bronze to silver alone, the fixed cost of one native query.

It starts one managed engine (``lakehouse engine start``, a free port), writes a bronze table
of heart-rate rows (5% invalid) and a patients table, loads each approach once, then appends
``--increment`` rows ``--rounds`` times and runs every approach on each increment, in a
shuffled order, timing each from building its queries to their end. Every round checks that
table + quarantine = bronze for each approach. Writes ``benchmarks/results/routed_flows.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.engine import WarmEngine

RESULTS = Path(__file__).parent / "results"
COLUMNS = ["device_id", "mrn", "time", "heartrate", "_source_file"]
APPROACHES = ("foreachBatch", "two flows, in turn", "two flows, together", "one flow")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6, help="increments timed (default 6)")
    parser.add_argument("--initial", type=int, default=200_000, help="rows of the initial load")
    parser.add_argument("--increment", type=int, default=5_000, help="rows per increment")
    parser.add_argument("--seed", type=int, default=20261126, help="the order of the approaches per round")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="routed_flows_") as folder, WarmEngine(Path(folder) / "lakehouse") as engine:
        spark = SparkSession.builder.remote(engine.url()).create()
        doc = measure(spark, Path(folder) / "data", args)
        spark.stop()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "routed_flows.json").write_text(json.dumps(doc, indent=1))
    (RESULTS / "routed_flows.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0 if all(r["balanced"] for r in doc["rounds"]) else 1


def measure(spark: SparkSession, data: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Load, then time each approach on each increment; table + quarantine checked per round."""
    bronze, patients = str(data / "bronze"), str(data / "patients")
    spark.range(500).select(F.col("id").alias("mrn"), F.concat(F.lit("patient "), F.col("id")).alias("name")) \
        .write.format("delta").save(patients)
    _rows(spark, 0, args.initial, "initial").write.format("delta").save(bronze)
    runs = _approaches(spark, data, bronze, patients)
    warmup = {name: run() for name, run in runs.items()}
    order, rng, landed = list(APPROACHES), random.Random(args.seed), args.initial
    rounds = []
    for number in range(1, args.rounds + 1):
        _rows(spark, landed, args.increment, f"increment-{number}").write.format("delta").mode("append").save(bronze)
        landed += args.increment
        rng.shuffle(order)
        seconds = {name: runs[name]() for name in order}
        counts = {name: _count(spark, data / name) for name in APPROACHES}
        rounds.append({"order": list(order), "seconds": seconds, "counts": counts,
                       "balanced": all(table + held == landed for name, (table, held) in counts.items()
                                       if name != "one flow")})
        print(f"round {number}: " + ", ".join(f"{n} {s:.2f} s" for n, s in seconds.items()), flush=True)
    return {"rows": {"initial": args.initial, "increment": args.increment}, "warmup": warmup, "rounds": rounds,
            "medians": {n: statistics.median(r["seconds"][n] for r in rounds) for n in APPROACHES}}


def _approaches(spark: SparkSession, data: Path, bronze: str, patients: str) -> dict[str, Callable[[], float]]:
    def source() -> DataFrame:
        return spark.readStream.format("delta").load(bronze)

    def flow(df: DataFrame, out: Path) -> Any:
        return (df.writeStream.format("delta").option("path", str(out))
                .option("checkpointLocation", str(out) + "_checkpoint").trigger(availableNow=True).start())

    def table_flow(name: str) -> Any:
        return flow(source().where(_valid()).join(spark.read.format("delta").load(patients), "mrn"),
                    data / name / "table")

    def quarantine_flow(name: str) -> Any:
        return flow(source().where(~_valid()).withColumn("_reason", _reason()), data / name / "quarantine")

    def timed(start: Callable[[], list[Any]]) -> float:
        began = time.monotonic()
        queries = start()
        for query in queries:
            query.awaitTermination()
        return time.monotonic() - began

    routed_app = uuid.uuid4().hex  # stands for the query id the project's sink uses

    def routed() -> list[Any]:
        out = data / "foreachBatch"
        df = source().withColumn("_reason", F.when(~_valid(), _reason())) \
            .join(spark.read.format("delta").load(patients), "mrn", "left")
        return [df.writeStream.foreachBatch(_route(str(out / "table"), str(out / "quarantine"), routed_app))
                .option("checkpointLocation", str(out / "checkpoint")).trigger(availableNow=True).start()]

    def in_turn() -> list[Any]:
        first = table_flow("two flows, in turn")
        first.awaitTermination()
        return [first, quarantine_flow("two flows, in turn")]

    return {
        "foreachBatch": lambda: timed(routed),
        "two flows, in turn": lambda: timed(in_turn),
        "two flows, together": lambda: timed(lambda: [table_flow("two flows, together"),
                                                     quarantine_flow("two flows, together")]),
        "one flow": lambda: timed(lambda: [table_flow("one flow")]),
    }


def _route(table: str, quarantine: str, app_id: str) -> Callable[[DataFrame, int], None]:
    def route(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            for rows, path in ((batch.where(F.col("_reason").isNotNull()).drop("name"), quarantine),
                               (batch.where(F.col("_reason").isNull()).drop("_reason"), table)):
                rows.write.format("delta").mode("append").option("txnAppId", app_id) \
                    .option("txnVersion", batch_id).save(path)
        finally:
            batch.unpersist()
    return route


def _rows(spark: SparkSession, start: int, count: int, name: str) -> DataFrame:
    """``count`` heart-rate rows; 3 in 60 invalid (no device, heart rate -5 or 350)."""
    kind = F.col("id") % 60
    return spark.range(start, start + count, 1, 4).select(
        F.when(kind == 0, F.lit(None).cast("bigint")).otherwise(F.col("id") % 1000).alias("device_id"),
        (F.col("id") % 500).alias("mrn"),
        F.col("id").cast("double").alias("time"),
        F.when(kind == 20, -5.0).when(kind == 40, 350.0).otherwise(60 + F.col("id") * 7 % 80).cast("double")
        .alias("heartrate"),
        F.lit(f"{name}.json").alias("_source_file"))


def _valid() -> Column:
    return F.coalesce((F.col("heartrate") > 0) & (F.col("heartrate") < 300) & F.col("device_id").isNotNull(),
                      F.lit(False))


def _reason() -> Column:
    return F.concat_ws(",", F.when(F.col("device_id").isNull(), F.lit("device_id_present")),
                       F.when(~F.coalesce((F.col("heartrate") > 0) & (F.col("heartrate") < 300), F.lit(False)),
                              F.lit("heartrate_in_range")))


def _count(spark: SparkSession, folder: Path) -> tuple[int, int]:
    def rows(path: Path) -> int:
        return spark.read.format("delta").load(str(path)).count() if (path / "_delta_log").exists() else 0
    return rows(folder / "table"), rows(folder / "quarantine")


def markdown(doc: dict[str, Any]) -> str:
    """The medians and every round, as ``routed_flows.md`` holds them."""
    rows = doc["rows"]
    lines = [
        "# A routed step on a warm engine: one foreachBatch query, or two native flows",
        "",
        f"`make bench-routed`: {len(doc['rounds'])} increments of {rows['increment']:,} rows after a load of "
        f"{rows['initial']:,}, each approach on each increment in a shuffled order. Seconds from building "
        "the queries to their end.",
        "",
        "| approach | median s | min s | max s | load s |",
        "|---|---|---|---|---|",
    ]
    for name in APPROACHES:
        times = [r["seconds"][name] for r in doc["rounds"]]
        lines.append(f"| {name} | {doc['medians'][name]:.2f} | {min(times):.2f} | {max(times):.2f} "
                     f"| {doc['warmup'][name]:.2f} |")
    balanced = all(r["balanced"] for r in doc["rounds"])
    lines += ["", f"Table + quarantine = bronze after every round, for every routed approach: {'yes' if balanced else 'NO'}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
