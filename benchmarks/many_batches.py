"""Does per-run overhead stay flat as micro-batches pile up? A table after 10 commits against
one after 10,000, and a streaming checkpoint after 10 batches against one after 10,000.

    python -m benchmarks.many_batches                      # 10 and 10,000
    python -m benchmarks.many_batches --batches 10 1000    # a quick look

Tables: each commit is what the exactly-once sink commits for a micro-batch of one tiny
Parquet file (an add with statistics, the batch's app transaction, the lakehouse's commit
metadata), as delta-rs commits it for ``DeltaTableStore`` (with its default post-commit
hooks: a log checkpoint every ``delta.checkpointInterval`` = 100 commits; see
:func:`build_table`). No Spark: the question is what the log costs. Timed, median of ``--repeats``, each
on a freshly opened table as a new run opens it:

- open: the latest version (``store.version``), and the batch a query last committed
  (``store.committed_batch``, what a run checks its checkpoint against);
- one increment: commit one more batch as the sink does, then plan the stream source's read
  of it from the previous position (``latestOffset`` and ``partitions`` of the project's
  Delta source), as the next table downstream does;
- the same after ``store.optimize`` (one compacted file, a log checkpoint);
- the same after ``store.vacuum``, once the batches are older than the log retention (30
  days: the log's files are aged so): VACUUM removes the expired commit files.

Checkpoints: a Spark checkpoint shaped as Spark leaves it after N batches of a file source
(offsets and commits of the last ``minBatchesToRetain`` = 100 batches; the file source's log
compacted every 10 batches, so its last compact file lists every file ever read), read and
checked as a run does before starting its query (``Checkpoint.state``).

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
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction
from pyspark.sql.streaming.datasource import ReadAllAvailable

from benchmarks.scenarios import machine_facts
from lakehouse_assets.storage import AppTransaction, DeltaTableStore
from lakehouse_assets.storage.checkpoint import Checkpoint
from lakehouse_assets.storage.event_log import commit_properties
from lakehouse_assets.storage.source import DeltaStreamReader

RESULTS = Path(__file__).resolve().parent / "results"
WORKDIR = Path(__file__).resolve().parent / ".work" / "many_batches"
QUERY_ID = "0f6c1a2e-benchmark-query"
SCHEMA = pa.schema([("id", pa.int64())])
SPARK_RETAINED_BATCHES = 100  # spark.sql.streaming.minBatchesToRetain, left at its default
FILE_SOURCE_COMPACT_INTERVAL = 10  # spark.sql.streaming.fileSource.log.compactInterval
CHECKPOINT_INTERVAL = 100  # delta.checkpointInterval, left at its default
LOG_RETENTION = dt.timedelta(days=30)  # delta.logRetentionDuration, left at its default


def commit_batch(table: DeltaTable, path: Path, batch: int) -> None:
    """One micro-batch as the sink commits it: one data file, the batch's app transaction."""
    name = write_data_file(path, batch)
    add = AddAction(path=name, size=(path / name).stat().st_size, partition_values={},
                    modification_time=int(time.time() * 1000), data_change=True, stats=stats(batch))
    table.create_write_transaction([add], mode="append", schema=table.schema(),
                                   commit_properties=commit_properties("STREAMING UPDATE",
                                                                       AppTransaction(QUERY_ID, batch), 1, None))


def build_table(path: Path, batches: int) -> float:
    """A table of ``batches`` commits (version 0 creates it); seconds taken.

    Committing 10,000 batches through delta-rs one by one takes the better part of an hour
    here (each commit costs more as the table's files pile up: what OPTIMIZE is for), so
    batches 1.. are written as the commit files delta-rs writes for them (commitInfo, add,
    txn, byte for byte the same fields), and the log checkpoint delta-rs would have written
    last (every ``delta.checkpointInterval`` = 100 commits) is written by delta-rs. What is
    measured afterwards goes through delta-rs and the project's code as a run does.
    """
    started = time.perf_counter()
    write_deltalake(str(path), pa.table({"id": pa.array([], pa.int64())}, schema=SCHEMA))
    log = path / "_delta_log"
    for batch in range(1, batches):
        now = int(time.time() * 1000)
        name = write_data_file(path, batch)
        info = {"timestamp": now, "operation": "WRITE", "operationParameters": {"partitionBy": "[]", "mode": "Append"},
                "engineInfo": "delta-rs:py-1.6.6", "clientVersion": "delta-rs.py-1.6.6",
                **(commit_properties("STREAMING UPDATE", AppTransaction(QUERY_ID, batch), 1, None).custom_metadata or {})}
        add = {"path": name, "partitionValues": {}, "size": (path / name).stat().st_size, "modificationTime": now,
               "dataChange": True, "stats": stats(batch), "tags": None, "baseRowId": None,
               "defaultRowCommitVersion": None, "clusteringProvider": None}
        lines = [{"commitInfo": info}, {"add": add}, {"txn": {"appId": QUERY_ID, "version": batch}}]
        (log / f"{batch:020d}.json").write_text("\n".join(json.dumps(line, separators=(",", ":")) for line in lines))
    last_checkpoint = (batches // CHECKPOINT_INTERVAL) * CHECKPOINT_INTERVAL - 1
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
    """Make the table's log files ``age`` old, as if its batches had run that long ago."""
    then = time.time() - age.total_seconds()
    for file in (path / "_delta_log").iterdir():
        os.utime(file, (then, then))


def median_seconds(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def plan_increment(path: Path, previous: int) -> int:
    """The source's planning of what came after version ``previous``: files to read."""
    reader = DeltaStreamReader({"path": str(path)}, _spark_schema())
    start = {"version": previous, "index": 0, "snapshot": False, "table": str(path),
             "tableId": DeltaTable(str(path)).metadata().id}
    end = reader.latestOffset(start, ReadAllAvailable())
    return len(reader.partitions(start, end))


def _spark_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType([T.StructField("id", T.LongType())])


def measure_table(path: Path, repeats: int) -> dict[str, float]:
    store = DeltaTableStore()
    result = {
        "open_version_s": median_seconds(lambda: store.version(str(path)), repeats),
        "committed_batch_s": median_seconds(lambda: store.committed_batch(str(path), QUERY_ID), repeats),
    }
    commits, plans = [], []
    for _ in range(repeats):
        version = store.version(str(path))
        assert version is not None
        started = time.perf_counter()
        table = DeltaTable(str(path))  # a new run opens the table afresh
        commit_batch(table, path, version + 1)
        commits.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert plan_increment(path, version) == 1
        plans.append(time.perf_counter() - started)
    result["increment_commit_s"] = statistics.median(commits)
    result["increment_plan_s"] = statistics.median(plans)
    log = path / "_delta_log"
    result["log_files"] = len(list(log.iterdir()))
    result["checkpoint_version"] = json.loads((log / "_last_checkpoint").read_text())["version"] \
        if (log / "_last_checkpoint").exists() else -1
    return result


def build_checkpoint(folder: Path, batches: int) -> None:
    """A file-source query's checkpoint as Spark leaves it after ``batches`` batches."""
    (folder / "offsets").mkdir(parents=True)
    (folder / "commits").mkdir()
    (folder / "sources" / "0").mkdir(parents=True)
    (folder / "metadata").write_text(json.dumps({"id": QUERY_ID}) + "\n")
    for batch in range(max(0, batches - SPARK_RETAINED_BATCHES), batches):
        offset = json.dumps({"logOffset": batch})
        (folder / "offsets" / str(batch)).write_text(
            f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":{batch},"conf":{{}}}}\n{offset}\n')
        (folder / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')

    def entry(batch: int) -> str:
        return json.dumps({"path": f"file:///landing/recordings/file-{batch:06d}.json", "timestamp": batch,
                           "batchId": batch})

    last_compact = (batches // FILE_SOURCE_COMPACT_INTERVAL) * FILE_SOURCE_COMPACT_INTERVAL - 1
    if last_compact >= 0:
        lines = ["v1", *(entry(b) for b in range(last_compact + 1))]
        (folder / "sources" / "0" / f"{last_compact}.compact").write_text("\n".join(lines) + "\n")
    for batch in range(last_compact + 1, batches):
        (folder / "sources" / "0" / str(batch)).write_text(f"v1\n{entry(batch)}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, nargs="+", default=[10, 10_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    shutil.rmtree(WORKDIR, ignore_errors=True)
    WORKDIR.mkdir(parents=True)
    rows: list[dict[str, Any]] = []
    for batches in args.batches:
        path = WORKDIR / f"table_{batches}"
        build_s = build_table(path, batches)
        row: dict[str, Any] = {"batches": batches, "build_s": build_s, **measure_table(path, args.repeats)}
        optimized = DeltaTableStore().optimize(str(path))
        row["after_optimize"] = {"files_compacted": optimized.files_removed,
                                 **measure_table(path, args.repeats)}
        age_log(path, LOG_RETENTION + dt.timedelta(days=1))
        vacuumed = DeltaTableStore().vacuum(str(path), retention=dt.timedelta(days=7), dry_run=False, readers=[])
        row["after_vacuum"] = {"log_cleaned": vacuumed.log_cleaned, **measure_table(path, args.repeats)}
        checkpoint = WORKDIR / f"checkpoint_{batches}"
        build_checkpoint(checkpoint, batches)
        row["checkpoint_state_s"] = median_seconds(Checkpoint(str(checkpoint)).state, args.repeats)
        row["checkpoint_bytes"] = sum(f.stat().st_size for f in checkpoint.rglob("*") if f.is_file())
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {"machine": machine_facts(), "repeats": args.repeats, "rows": rows,
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
        f"Run {report['run_at']} on {os.cpu_count()} CPUs; medians of {report['repeats']}. "
        "See `benchmarks/many_batches.py` for what each column times.", "",
        "## Delta table: N commits of one micro-batch each", "",
        "| commits | build s | log files | last log checkpoint | open version ms | committed_batch ms "
        "| commit one batch ms | plan its read ms | ratios to the smallest (open, commit, plan) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, nested in (("", None), (" after OPTIMIZE", "after_optimize"),
                          (" after VACUUM, the batches older than the log retention", "after_vacuum")):
        for row in rows:
            data = row[nested] if nested else row
            lines.append(
                f"| {row['batches']:,}{label} | {row['build_s']:.1f} | {data['log_files']:,} | "
                f"{data['checkpoint_version']} | {ms(data['open_version_s'])} | {ms(data['committed_batch_s'])} | "
                f"{ms(data['increment_commit_s'])} | {ms(data['increment_plan_s'])} | "
                f"{ratio(row, 'open_version_s', nested)}, {ratio(row, 'increment_commit_s', nested)}, "
                f"{ratio(row, 'increment_plan_s', nested)} |")
    lines += ["", "## Spark checkpoint after N batches of a file source", "",
              "| batches | checkpoint bytes | Checkpoint.state() ms | ratio |", "|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['batches']:,} | {row['checkpoint_bytes']:,} | {ms(row['checkpoint_state_s'])} | "
                     f"{ratio(row, 'checkpoint_state_s')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
