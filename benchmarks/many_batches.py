"""Does per-run overhead stay flat as micro-batches pile up? A Delta table after 10 commits against
one after 10,000.

    python -m benchmarks.many_batches                      # 10 and 10,000
    python -m benchmarks.many_batches --batches 10 1000    # a quick look

Needs Java: Spark runs embedded (``local[2]``), in one SparkSession with Delta Lake's connector
built by ``lakehouse_assets.spark.build_spark_session`` with the project's settings, started
once the tables are built; each Spark step first runs a few times untimed on a 3-commit table
(the JVM loads and compiles Delta's code on first use). Spark's own start is in no figure.

Tables: N commits of one micro-batch each, each a tiny Parquet file. Version 0 is created by
delta-rs; batches 1..N-1 are written as commit files for such a batch (an add with statistics,
the batch's app transaction, the lakehouse's commit metadata in ``userMetadata``: the keys of
:mod:`lakehouse_assets.storage.batch_record`, the commit being the batch's one record), and delta-rs
writes a log checkpoint where Delta's connector, which commits the sink's batches, writes its
last (at versions divisible by ``delta.checkpointInterval`` = 10): see :func:`build_table`.
That takes seconds where 10,000 commits through Spark would take hours. Everything timed goes
through the project's code as a run does; medians of ``--repeats``, the tables taking turns
(each repeat starts with the next one):

- open, without Spark (delta-rs): the latest version (``store.version``), and the batch a query
  last committed (``store.committed_batch``, its app transaction);
- commit one more batch as the sink does: ``store.write`` of a one-row DataFrame with the batch's
  app transaction (Delta's ``txnAppId``/``txnVersion``), Delta's log cache emptied first
  (``DeltaLog.clearCache()``, as in a run's new driver process);
- read that commit as the next table downstream does, with Delta's own streaming source:
  ``store.read_stream`` (``spark.readStream.format("delta")`` with ``startingVersion`` = the new
  commit's version, the previous one + 1) into the ``noop`` sink with
  ``trigger(availableNow=True)`` and a fresh checkpoint, timed from building the query to the end
  of ``awaitTermination()``; it must read the batch's one row. Once "cold", Delta's log cache
  emptied first (the table's log read afresh, as in a run's new driver process), then "warm",
  with the table's log cached (as in a long-lived Spark Connect engine);
- the same after ``store.optimize`` (Delta's OPTIMIZE: one compacted file);
- the same once the batches are older than the log retention (``delta.logRetentionDuration`` =
  30 days: the log's file times are moved back 31 days), after ``store.vacuum`` (Delta's VACUUM,
  which deletes data files only, here none: a compaction's removed files are kept for
  ``delta.deletedFileRetentionDuration`` = 7 days) and the sink's commits up to Delta's next log
  checkpoint, where Delta itself deletes the expired commit files.

Writes ``benchmarks/results/many_batches.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from benchmarks.scenarios import machine_facts
from lakehouse_assets.storage import AppTransaction, DeltaTableStore, StreamOptions
from lakehouse_assets.storage.batch_record import BATCH_KEY, OPERATION_KEY, QUERY_KEY, RUN_KEY, user_metadata

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RESULTS = Path(__file__).resolve().parent / "results"
WORKDIR = Path(__file__).resolve().parent / ".work" / "many_batches"
QUERY_ID = "0f6c1a2e-benchmark-query"
#: The run every commit of the benchmark names, as a run's sink stamps its commits.
RUN_ID = "many-batches-benchmark-run"
SCHEMA = pa.schema([("id", pa.int64())])
CHECKPOINT_INTERVAL = 10  # delta.checkpointInterval of Delta's connector, left at its default
LOG_RETENTION = dt.timedelta(days=30)  # delta.logRetentionDuration, left at its default


def build_table(path: Path, batches: int) -> float:
    """A table of ``batches`` commits (version 0 creates it); seconds taken.

    Committing 10,000 batches one by one takes hours through Spark, and the better part of an
    hour through delta-rs (each commit costs more as the table's files pile up: what OPTIMIZE is
    for), so batches 1.. are written as commit files (commitInfo with the lakehouse's
    ``userMetadata`` and Delta's row count, add, txn), and the last log checkpoint Delta's connector
    would have written (at every version divisible by ``delta.checkpointInterval`` = 10) is
    written by delta-rs. What is measured afterwards goes through delta-rs, Delta's connector
    and the project's code as a run does.
    """
    started = time.perf_counter()
    write_deltalake(str(path), pa.table({"id": pa.array([], pa.int64())}, schema=SCHEMA))
    log = path / "_delta_log"
    for batch in range(1, batches):
        now = int(time.time() * 1000)
        name = write_data_file(path, batch)
        info = {"timestamp": now, "operation": "WRITE", "operationParameters": {"partitionBy": "[]", "mode": "Append"},
                "engineInfo": "delta-rs:py-1.6.6", "clientVersion": "delta-rs.py-1.6.6",
                "operationMetrics": {"numFiles": "1", "numOutputRows": "1",
                                     "numOutputBytes": str((path / name).stat().st_size)},
                "userMetadata": user_metadata({OPERATION_KEY: "STREAMING UPDATE", QUERY_KEY: QUERY_ID,
                                               BATCH_KEY: batch, RUN_KEY: RUN_ID})}
        add = {"path": name, "partitionValues": {}, "size": (path / name).stat().st_size, "modificationTime": now,
               "dataChange": True, "stats": stats(batch), "tags": None, "baseRowId": None,
               "defaultRowCommitVersion": None, "clusteringProvider": None}
        lines = [{"commitInfo": info}, {"add": add}, {"txn": {"appId": QUERY_ID, "version": batch}}]
        (log / f"{batch:020d}.json").write_text("\n".join(json.dumps(line, separators=(",", ":")) for line in lines))
    last_checkpoint = ((batches - 1) // CHECKPOINT_INTERVAL) * CHECKPOINT_INTERVAL
    if last_checkpoint > 0:
        DeltaTable(str(path), version=last_checkpoint).create_checkpoint()
    return time.perf_counter() - started


def write_data_file(path: Path, batch: int) -> str:
    name = f"part-{batch:06d}.parquet"
    pq.write_table(pa.table({"id": pa.array([batch], pa.int64())}), path / name)
    return name


def stats(batch: int) -> str:
    return json.dumps({"numRecords": 1, "minValues": {"id": batch}, "maxValues": {"id": batch}, "nullCount": {"id": 0}})


def age_log(path: Path, age: dt.timedelta) -> None:
    """Make the table's log files ``age`` older, as if its batches had run that long ago.

    Each file keeps its place in time relative to the others: Delta's log cleanup reads the
    files' times as the commits' times, takes a commit no newer than the one before it for a
    clock gone backwards, and keeps such a run of commits up to the next checkpoint written
    later; with every file given one time (as this function once did) it deletes nothing.
    """
    seconds = age.total_seconds()
    for file in (path / "_delta_log").iterdir():
        then = file.stat().st_mtime - seconds
        os.utime(file, (then, then))


def median_seconds(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def start_spark() -> SparkSession:
    """The local session every Spark step runs in (Delta Lake's connector, the project's settings)."""
    from lakehouse_assets.settings import LakehouseSettings
    from lakehouse_assets.spark import build_spark_session

    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(WORKDIR / "lakehouse")})
    return build_spark_session(settings, app_name="many_batches")


def warm_up(spark: SparkSession, rounds: int = 3) -> None:
    """Run each Spark step a few times on a small table, untimed: the JVM loads and compiles
    Delta's code on first use (tens of seconds here, less each time for a while), which would
    otherwise count against the table measured first."""
    path = WORKDIR / "warm_up"
    build_table(path, 3)
    for repeat in range(rounds):
        one_increment(spark, path, f"warm_up_{repeat}")
    DeltaTableStore().optimize(spark, str(path))
    shutil.rmtree(path, ignore_errors=True)


def forget_logs(spark: SparkSession) -> None:
    """Empty Delta's cache of table logs (and their snapshots), as a new driver process starts."""
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]


def commit_batch(spark: SparkSession, path: Path, batch: int) -> int:
    """One micro-batch as the sink commits it (one row, the batch's app transaction); its version."""
    df = spark.createDataFrame([(batch,)], "id long")
    committed = DeltaTableStore().write(df, str(path), transaction=AppTransaction(QUERY_ID, batch),
                                        operation="STREAMING UPDATE", metadata={RUN_KEY: RUN_ID})
    assert committed.version is not None, committed
    return committed.version


def read_increment(spark: SparkSession, path: Path, version: int, checkpoint: Path) -> int:
    """Delta's streaming source from ``version`` on, until it has read all there is: rows read."""
    stream = DeltaTableStore().read_stream(spark, str(path), StreamOptions(starting_version=version))
    query = (stream.writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(checkpoint)).start())
    query.awaitTermination()
    return sum(int(progress["numInputRows"]) for progress in query.recentProgress)


def timed(action: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """Seconds ``action(*args, **kwargs)`` took, and what it returned."""
    started = time.perf_counter()
    result = action(*args, **kwargs)
    return time.perf_counter() - started, result


def one_increment(spark: SparkSession, path: Path, tag: str) -> tuple[float, float, float]:
    """Commit one more batch to the table, then read it with Delta's streaming source, cold and
    warm: the seconds each took."""
    batch = DeltaTableStore().committed_batch(str(path), QUERY_ID)
    assert batch is not None
    forget_logs(spark)
    commit_s, version = timed(commit_batch, spark, path, batch + 1)
    streams = WORKDIR / "streams"
    forget_logs(spark)
    cold_s, rows = timed(read_increment, spark, path, version, streams / f"{tag}_cold")
    assert rows == 1, f"read {rows} rows of version {version} of {path}, not 1"
    warm_s, rows = timed(read_increment, spark, path, version, streams / f"{tag}_warm")
    assert rows == 1, f"read {rows} rows of version {version} of {path}, not 1"
    shutil.rmtree(streams, ignore_errors=True)
    return commit_s, cold_s, warm_s


def measure_stage(spark: SparkSession, tables: dict[int, Path], repeats: int) -> dict[int, dict[str, Any]]:
    """Each table's figures, medians of ``repeats``; the tables take turns, each repeat starting
    with the next one, so that neither gains from the JVM warming up as it runs."""
    store = DeltaTableStore()
    result: dict[int, dict[str, Any]] = {
        n: {"open_version_s": median_seconds(lambda p=path: store.version(str(p)), repeats),
            "committed_batch_s": median_seconds(lambda p=path: store.committed_batch(str(p), QUERY_ID), repeats)}
        for n, path in tables.items()}
    samples: dict[int, list[tuple[float, float, float]]] = {n: [] for n in tables}
    order = list(tables)
    for repeat in range(repeats):
        shift = repeat % len(order)
        for n in order[shift:] + order[:shift]:
            samples[n].append(one_increment(spark, tables[n], f"{n}_{repeat}"))
    for n, path in tables.items():
        commits, cold, warm = zip(*samples[n], strict=True)
        result[n].update({"increment_commit_s": statistics.median(commits),
                          "increment_read_cold_s": statistics.median(cold),
                          "increment_read_warm_s": statistics.median(warm), **log_facts(path)})
    return result


def log_facts(path: Path) -> dict[str, Any]:
    log = path / "_delta_log"
    last = log / "_last_checkpoint"
    return {"log_files": len(list(log.iterdir())), "version": DeltaTableStore().version(str(path)),
            "checkpoint_version": json.loads(last.read_text())["version"] if last.exists() else -1}


def clean_log(spark: SparkSession, path: Path) -> int:
    """Commit the sink's next batches until Delta's connector writes a log checkpoint (at a
    version divisible by ``delta.checkpointInterval``), where it deletes expired commit files;
    the commits it took."""
    store = DeltaTableStore()
    commits = 0
    while True:
        batch = store.committed_batch(str(path), QUERY_ID)
        assert batch is not None
        commits += 1
        if commit_batch(spark, path, batch + 1) % CHECKPOINT_INTERVAL == 0:
            return commits


def measure(spark: SparkSession, tables: dict[int, Path], repeats: int) -> dict[int, dict[str, Any]]:
    """The tables as built, after OPTIMIZE, then after VACUUM and a log checkpoint once their
    logs are older than the log retention."""
    store = DeltaTableStore()
    rows = measure_stage(spark, tables, repeats)
    optimized: dict[int, dict[str, Any]] = {}
    for n, path in tables.items():
        optimize_s, result = timed(store.optimize, spark, str(path))
        optimized[n] = {"files_compacted": result.files_removed, "optimize_s": optimize_s}
    for n, figures in measure_stage(spark, tables, repeats).items():
        rows[n]["after_optimize"] = {**optimized[n], **figures}
    vacuumed: dict[int, dict[str, Any]] = {}
    for n, path in tables.items():
        age_log(path, LOG_RETENTION + dt.timedelta(days=1))
        vacuum_s, result = timed(store.vacuum, spark, str(path), retention=dt.timedelta(days=7), dry_run=False,
                                 readers=[])
        vacuumed[n] = {"files_vacuumed": len(result.files), "vacuum_s": vacuum_s,
                       "log_files_before_cleanup": len(list((path / "_delta_log").iterdir())),
                       "commits_to_checkpoint": clean_log(spark, path),
                       "log_files_after_cleanup": len(list((path / "_delta_log").iterdir()))}
    for n, figures in measure_stage(spark, tables, repeats).items():
        rows[n]["after_vacuum"] = {**vacuumed[n], **figures}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, nargs="+", default=[10, 10_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    shutil.rmtree(WORKDIR, ignore_errors=True)
    WORKDIR.mkdir(parents=True)
    machine = machine_facts()
    tables = {n: WORKDIR / f"table_{n}" for n in args.batches}
    build_s = {n: build_table(path, n) for n, path in tables.items()}
    spark = start_spark()
    try:
        warm_up(spark)
        figures = measure(spark, tables, args.repeats)
    finally:
        spark.stop()
    rows: list[dict[str, Any]] = []
    for n in args.batches:
        rows.append({"batches": n, "build_s": build_s[n], **figures[n]})
        print(json.dumps(rows[-1]), flush=True)
    report = {"machine": machine, "repeats": args.repeats, "rows": rows,
              "run_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "many_batches.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "many_batches.md").write_text(render(report))
    shutil.rmtree(WORKDIR, ignore_errors=True)


def render(report: dict[str, Any]) -> str:
    rows = report["rows"]
    base = rows[0]

    def ms(value: float) -> str:
        return f"{value * 1000:.1f}"

    def ratio(row: dict[str, Any], key: str, nested: str | None = None) -> str:
        mine = row[nested][key] if nested else row[key]
        theirs = base[nested][key] if nested else base[key]
        return f"{mine / theirs:.2f}x" if theirs else ""

    lines = [
        "# Per-run overhead after many micro-batches", "",
        f"Run {report['run_at']} on {report['machine'].get('cpus', os.cpu_count())} CPUs; medians of "
        f"{report['repeats']}. See `benchmarks/many_batches.py` for what each column times: opening is delta-rs "
        "without Spark; the commit and the streaming reads run in one local SparkSession with Delta Lake's "
        "connector (its start not included); cold reads empty Delta's log cache first, warm ones do not.", "",
        "## Delta table: N commits of one micro-batch each", "",
        "| commits | build s | log files | last log checkpoint | open version ms | committed_batch ms "
        "| commit one batch ms | stream it, cold ms | stream it, warm ms "
        "| ratios to the smallest (open, commit, cold, warm) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, nested in (("", None), (" after OPTIMIZE", "after_optimize"),
                          (" after VACUUM and a log checkpoint, the batches older than the log retention",
                           "after_vacuum")):
        for row in rows:
            data = row[nested] if nested else row
            lines.append(
                f"| {row['batches']:,}{label} | {row['build_s']:.1f} | {data['log_files']:,} | "
                f"{data['checkpoint_version']} | {ms(data['open_version_s'])} | {ms(data['committed_batch_s'])} | "
                f"{ms(data['increment_commit_s'])} | {ms(data['increment_read_cold_s'])} | "
                f"{ms(data['increment_read_warm_s'])} | "
                f"{ratio(row, 'open_version_s', nested)}, {ratio(row, 'increment_commit_s', nested)}, "
                f"{ratio(row, 'increment_read_cold_s', nested)}, {ratio(row, 'increment_read_warm_s', nested)} |")
    lines += ["", "Maintenance: OPTIMIZE and VACUUM through `store.optimize` / `store.vacuum` (Delta's SQL); "
              "the log checkpoint after VACUUM is written by the sink's next commits, and is where Delta "
              "deletes the expired commit files.", "",
              "| commits | OPTIMIZE s | files compacted | VACUUM s | files vacuumed | log files before the checkpoint "
              "| commits to the checkpoint | log files after it |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        opt, vac = row["after_optimize"], row["after_vacuum"]
        lines.append(f"| {row['batches']:,} | {opt['optimize_s']:.1f} | {opt['files_compacted']:,} | "
                     f"{vac['vacuum_s']:.1f} | {vac['files_vacuumed']:,} | {vac['log_files_before_cleanup']:,} | "
                     f"{vac['commits_to_checkpoint']} | {vac['log_files_after_cleanup']:,} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
