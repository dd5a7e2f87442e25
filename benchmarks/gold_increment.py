"""Does a one-file increment of gold cost the same on a big table as on a small one?

    python -m benchmarks.gold_increment                          # 10k, 1M and 10M silver rows
    python -m benchmarks.gold_increment --sizes 10000 100000     # a quick look

For each size, a fresh lakehouse gets ``silver.recordings_enriched`` of that many rows
(one patient per 100 rows, at least 1,000, so gold grows with silver; 100 devices; spread
over 2020; written directly, not landed: the question is gold's cost), then ``gold.daily_patient_avg`` is built once (not timed). Then, ``--runs``
times, one file's worth of recordings (5,000 rows, the next day) is appended to silver and
gold is materialized again: timed, each run a fresh process through Dagster (the project's
Definitions, ``dagster.materialize``), as a run of the product is. The project's gold is kept
incrementally (Spark's stateful aggregation in update mode, each batch's changed groups merged by key); the same
query kept in complete mode (the seeds' way, before), is measured for comparison. Reports medians: whole process, ``materialize()`` alone, peak memory; and the
ratio of each size to the smallest.

Writes ``benchmarks/results/gold_increment.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from benchmarks.contenders import PYTHON, base_env, product_dir
from benchmarks.measure import ChildFailed, run_child
from benchmarks.scenarios import machine_facts
from lakehouse_assets.assets.table_asset import stream_from, table_asset
from lakehouse_assets.storage import DeltaTableStore

RESULTS = Path(__file__).resolve().parent / "results"
WORKDIR = Path(__file__).resolve().parent / ".work" / "gold_increment"
INCREMENT_ROWS = 5_000
MIN_PATIENTS, ROWS_PER_PATIENT, DEVICES = 1_000, 100, 100
YEAR_START = "2020-01-01 00:00:00"
MODES = ("incremental", "complete")
COMPLETE_ASSET = "daily_patient_avg_complete"


# --- the children -----------------------------------------------------------------------------

@table_asset(layer="gold", name=COMPLETE_ASSET, output_mode="complete",
             ins={"recordings": stream_from(["silver", "recordings_enriched"])})
def daily_patient_avg_complete(recordings: DataFrame) -> DataFrame:
    """The seeds' daily average kept in complete mode, as gold was before it was kept incrementally."""
    return (recordings.groupBy("mrn", "name", F.date_trunc("DD", "time").alias("date"))
            .agg(F.mean("heartrate").alias("avg_heartrate")))


def patients_for(size: int) -> int:
    """How many patients a silver table of ``size`` rows has: gold grows with silver."""
    return max(MIN_PATIENTS, size // ROWS_PER_PATIENT)


def write_silver(rows: int, first_id: int, day: int | None, patients: int) -> None:
    """Append ``rows`` silver rows of ``patients`` patients; spread over the year, or all on ``day`` (0-based)."""
    from lakehouse_assets.settings import LakehouseSettings
    from lakehouse_assets.spark import build_spark_session
    from lakehouse_assets.storage import DeltaTableStore

    settings = LakehouseSettings.from_env()
    spark = build_spark_session(settings)
    ids = spark.range(first_id, first_id + rows)
    offset = (F.col("id") % 86_400) if day is not None else (F.col("id") * 31_536_000 / max(rows, 1)).cast("long")
    start = F.unix_timestamp(F.lit(YEAR_START)) + (F.lit(day * 86_400) if day is not None else F.lit(0))
    silver = ids.select(
        (F.col("id") % DEVICES).alias("device_id"), (F.col("id") % patients).alias("mrn"),
        F.concat(F.lit("patient "), (F.col("id") % patients).cast("string")).alias("name"),
        F.timestamp_seconds(start + offset).alias("time"), (60 + F.col("id") % 40).cast("double").alias("heartrate"))
    DeltaTableStore().write(silver, str(settings.table_path("silver", "recordings_enriched")), mode="append")
    spark.stop()


def materialize_gold(mode: str) -> None:
    """Materialize gold's daily average (the project's SQL asset, or the same query in complete
    mode); print the seconds ``materialize()`` took."""
    from lakehouse_assets.definitions import defs

    assets = [a for a in (defs.assets or []) if isinstance(a, dg.AssetsDefinition)]
    selection = ["gold/daily_patient_avg"] if mode == "incremental" else [f"gold/{COMPLETE_ASSET}"]
    started = time.monotonic()
    dg.materialize([*assets, daily_patient_avg_complete], selection=selection, resources=dict(defs.resources or {}),
                   instance=dg.DagsterInstance.ephemeral())
    print(json.dumps({"materialize_seconds": round(time.monotonic() - started, 2)}))


# --- the parent -------------------------------------------------------------------------------

def _child(root: Path, log: Path, *argv: str) -> dict[str, Any]:
    env = base_env(LAKEHOUSE_ROOT=str(root))
    result = run_child([PYTHON, "-m", "benchmarks.gold_increment", *argv], env=env, cwd=product_dir(), log_path=log,
                       timeout_seconds=3600)
    lines = [line for line in log.read_text().splitlines() if line.startswith("{\"materialize_seconds\"")]
    return {"wall_seconds": round(result.wall_seconds, 2), "peak_rss_mib": round(result.peak_rss_bytes / 2**20),
            **(json.loads(lines[-1]) if lines else {})}


def measure(size: int, mode: str, runs: int, work: Path, log: Any) -> dict[str, Any]:
    root = work / f"{mode}_{size}"
    shutil.rmtree(root, ignore_errors=True)
    logs = work / "logs" / f"{mode}_{size}"
    patients = str(patients_for(size))
    _child(root, logs / "silver.log", "silver", "--rows", str(size), "--first-id", "0", "--patients", patients)
    built = _child(root, logs / "initial.log", "gold", "--mode", mode)
    log(f"{mode} {size:,}: gold built in {built['wall_seconds']} s")
    increments = []
    for run in range(runs):
        _child(root, logs / f"increment_{run}_silver.log", "silver", "--rows", str(INCREMENT_ROWS),
               "--first-id", str(size + run * INCREMENT_ROWS), "--day", str(366 + run), "--patients", patients)
        timed = _child(root, logs / f"increment_{run}.log", "gold", "--mode", mode)
        increments.append(timed)
        log(f"  increment {run + 1}: {timed['wall_seconds']} s (materialize {timed.get('materialize_seconds')} s)")
    gold = root / "gold" / ("daily_patient_avg" if mode == "incremental" else COMPLETE_ASSET)
    gold_rows = DeltaTableStore().snapshot(str(gold)).row_count()
    shutil.rmtree(root, ignore_errors=True)
    return {"size": size, "mode": mode, "gold_rows": gold_rows, "initial": built, "increments": increments,
            "median_wall_seconds": statistics.median(i["wall_seconds"] for i in increments),
            "median_materialize_seconds": statistics.median(i.get("materialize_seconds", 0) for i in increments),
            "max_peak_rss_mib": max(i["peak_rss_mib"] for i in increments)}


def report(doc: dict[str, Any]) -> str:
    lines = ["# Gold increment as gold grows: incremental (changed groups merged by key) vs complete mode", "",
             f"Run {doc['meta']['started']} on {doc['meta'].get('cpus')} CPUs; {doc['meta']['runs']} increments of "
             f"{INCREMENT_ROWS:,} rows (one landed file's worth, the next day) per size and mode, each a fresh "
             "process through Dagster. Silver is written directly, one patient per 100 rows (at least 1,000), "
             "spread over 366 days, so gold grows with silver. Medians.", "",
             "| mode | silver rows | gold rows | increment, whole process s | materialize() s "
             "| ratio to smallest (materialize) | peak RSS MiB | initial build s |", "|---|---|---|---|---|---|---|---|"]
    for mode in MODES:
        rows = [r for r in doc["results"] if r["mode"] == mode]
        if not rows:
            continue
        base = rows[0].get("median_materialize_seconds") or 1
        for r in rows:
            if "failed" in r:
                lines.append(f"| {mode} | {r['size']:,} | | failed: {r['failed']} | | | | |")
                continue
            lines.append(f"| {mode} | {r['size']:,} | {r.get('gold_rows') or 0:,} | {r['median_wall_seconds']:.1f} "
                         f"| {r['median_materialize_seconds']:.1f}"
                         f" | {r['median_materialize_seconds'] / base:.2f} | {r['max_peak_rss_mib']} "
                         f"| {r['initial']['wall_seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gold_increment", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    silver = sub.add_parser("silver")
    silver.add_argument("--rows", type=int, required=True)
    silver.add_argument("--first-id", type=int, default=0)
    silver.add_argument("--day", type=int)
    silver.add_argument("--patients", type=int, default=MIN_PATIENTS)
    gold = sub.add_parser("gold")
    gold.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000, 10_000_000])
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--output", default="gold_increment")
    args = parser.parse_args(argv)
    if args.command == "silver":
        write_silver(args.rows, args.first_id, args.day, args.patients)
        return 0
    if args.command == "gold":
        materialize_gold(args.mode)
        return 0
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {message}", flush=True)

    doc: dict[str, Any] = {"meta": {**machine_facts(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                    "runs": args.runs}, "results": []}
    for mode in args.modes:
        for size in sorted(args.sizes):
            try:
                doc["results"].append(measure(size, mode, args.runs, WORKDIR, log))
            except ChildFailed as exc:  # a size too big for the machine is a result too
                log(f"{mode} {size:,}: failed: {str(exc).splitlines()[0]}")
                doc["results"].append({"size": size, "mode": mode, "failed": str(exc).splitlines()[-1][:300]})
            RESULTS.mkdir(exist_ok=True)
            (RESULTS / f"{args.output}.json").write_text(json.dumps(doc, indent=2) + "\n")
            (RESULTS / f"{args.output}.md").write_text(report(doc))
    log(f"done: {RESULTS / args.output}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
