"""Who appends the event log: delta-rs, or Delta Lake's connector in Spark?

    python -m benchmarks.event_log_writer --runs 30      # make bench-event-log

The event log (``system.event_log``) gets one commit per table per run: the batches the
table's query committed, with what Spark's progress measured (rows read, start, duration) and
the batches that failed, which no table commit holds. It is appended by delta-rs, from Arrow,
in the process that ran the query; the tables themselves are written by Delta Lake's connector.
Issue 46 asks for one Delta writer, or a measurement saying why not. This times the append a
run makes (``--events`` rows in one commit, idempotent by an app transaction, as
``storage/event_log.py`` does) ``--runs`` times each way, into a log of its own:

- ``delta-rs``: the product's :func:`~lakehouse_assets.storage.event_log.append_events`;
- ``connector, embedded``: the same rows appended by ``DataFrame.write.format("delta")`` with
  ``txnAppId``/``txnVersion``, in an embedded SparkSession (started before timing);
- ``connector, engine``: the same on a warm Spark Connect engine (``lakehouse engine start`` on
  a free port), as a run attached to the engine would.

Each way's log is read back at the end: it must hold every row once. Writes
``benchmarks/results/event_log_writer.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from benchmarks.engine import WarmEngine
from lakehouse_assets.location import locate
from lakehouse_assets.storage import AppTransaction
from lakehouse_assets.storage.event_log import EVENT_LOG_SCHEMA, BatchEvent, ExpectationResult, append_events

RESULTS = Path(__file__).parent / "results"
WAYS = ("delta-rs", "connector, embedded", "connector, engine")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30, help="appends timed per way (default 30)")
    parser.add_argument("--events", type=int, default=2, help="batches per append, as one run of a table logs")
    parser.add_argument("--no-engine", action="store_true", help="skip the warm engine")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    doc: dict[str, Any] = {"measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                           "runs": args.runs, "events_per_append": args.events, "ways": {}}
    with tempfile.TemporaryDirectory(prefix="event_log_writer_") as folder:
        root = Path(folder)
        doc["ways"]["delta-rs"] = _measure(root / "delta_rs", args, _delta_rs_append)
        from lakehouse_assets.settings import LakehouseSettings
        from lakehouse_assets.spark import build_spark_session

        embedded = build_spark_session(LakehouseSettings(locate(root / "embedded_root")), app_name="event_log_writer")
        doc["ways"]["connector, embedded"] = _measure(root / "embedded", args, _connector_append(embedded))
        embedded.stop()
        if not args.no_engine:
            with WarmEngine(root / "engine_root") as engine:
                remote = SparkSession.builder.remote(engine.url()).create()
                doc["ways"]["connector, engine"] = _measure(root / "engine", args, _connector_append(remote))
                remote.stop()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "event_log_writer.json").write_text(json.dumps(doc, indent=1))
    (RESULTS / "event_log_writer.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


Append = Callable[[Path, list[BatchEvent], AppTransaction], None]


def _measure(path: Path, args: argparse.Namespace, append: Append) -> dict[str, Any]:
    """Time ``args.runs`` appends of ``args.events`` events each into a new log at ``path``
    (one untimed append first: the log's creation), and check the log holds each row once."""
    seconds = []
    for run in range(args.runs + 1):
        events = _events(run, args.events)
        started = time.perf_counter()
        append(path, events, AppTransaction("bench#query", run))
        if run:
            seconds.append(time.perf_counter() - started)
    rows = DeltaTable(str(path)).to_pyarrow_table(columns=["batch_id"]).column("batch_id").to_pylist()
    expected = sorted(run * args.events + i for run in range(args.runs + 1) for i in range(args.events))
    if sorted(rows) != expected:
        raise AssertionError(f"{path}: the log holds {len(rows)} rows, not each of the {len(expected)} once")
    ordered = sorted(seconds)
    return {"median_ms": round(statistics.median(seconds) * 1000, 1),
            "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 1),
            "min_ms": round(ordered[0] * 1000, 1), "max_ms": round(ordered[-1] * 1000, 1)}


def _events(run: int, count: int) -> list[BatchEvent]:
    now = dt.datetime.now(dt.UTC)
    return [BatchEvent(run_id=f"run-{run}", table="silver.recordings_enriched", query_id="query",
                       batch_id=run * count + i, table_version=run * count + i, input_rows=400, output_rows=396,
                       quarantined_rows=4, expectations=(ExpectationResult("valid_heartrate", 396, 4),),
                       started_at=now, duration_ms=850,
                       source_offsets='{"sources": [{"sourceVersion": 1, "reservoirVersion": 3, "index": -1}]}')
            for i in range(count)]


def _delta_rs_append(path: Path, events: list[BatchEvent], transaction: AppTransaction) -> None:
    append_events(locate(path), events, logs=transaction)


def _connector_append(spark: SparkSession) -> Append:
    def append(path: Path, events: list[BatchEvent], transaction: AppTransaction) -> None:
        rows = pa.Table.from_pylist([e.as_row() for e in events], schema=EVENT_LOG_SCHEMA)
        (spark.createDataFrame(rows).write.format("delta").mode("append")
         .option("txnAppId", transaction.app_id).option("txnVersion", transaction.batch_id).save(str(path)))

    return append


def markdown(doc: dict[str, Any]) -> str:
    """The figures as a table, one row per way."""
    lines = [
        "# Appending the event log: delta-rs or Delta Lake's connector",
        "",
        f"Measured {doc['measured_at']}: {doc['runs']} appends per way, {doc['events_per_append']} events per "
        "append (one commit each, idempotent by an app transaction), on this machine; `make bench-event-log`.",
        "",
        "| writer | median ms | p90 ms | min ms | max ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for way in WAYS:
        if way in doc["ways"]:
            w = doc["ways"][way]
            lines.append(f"| {way} | {w['median_ms']} | {w['p90_ms']} | {w['min_ms']} | {w['max_ms']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
