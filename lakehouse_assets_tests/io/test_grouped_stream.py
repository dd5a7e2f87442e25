"""A grouped streaming table: Spark's stateful aggregation in output mode ``update``, each
batch's changed groups merged by key by the exactly-once sink. It matches a plain-Python
aggregation run after run, through a crash between a batch's commit and its checkpoint, and a
batch rewrites only the files that hold a group it changes."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.assets.gold import daily_patient_avg
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.faults import raising_at
from lakehouse_assets.io.handlers.stream import _kept
from lakehouse_assets.io.table_run import TableRef, TableRun
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import TableSpec
from lakehouse_assets.storage import DeltaSink, DeltaTableStore
from lakehouse_assets.streaming import Trigger, run_stream

SOURCE = "device long, at timestamp, reading double"
KEYS = ["device", "day"]
MEASURES = ("mean_reading", "readings", "rows", "total", "low", "high")
START = dt.datetime(2026, 1, 1)


def _grouped(landing: Path, spark: SparkSession) -> DataFrame:
    rows = spark.readStream.schema(SOURCE).option("maxFilesPerTrigger", 1).json(str(landing))
    return rows.groupBy("device", F.date_trunc("DD", "at").alias("day")).agg(
        F.mean("reading").alias("mean_reading"), F.count("reading").alias("readings"), F.count("*").alias("rows"),
        F.sum("reading").alias("total"), F.min("reading").alias("low"), F.max("reading").alias("high"))


def _land(landing: Path, name: str, rows: list[tuple[Any, ...]]) -> None:
    landing.mkdir(parents=True, exist_ok=True)
    (landing / name).write_text("".join(
        json.dumps({"device": d, "at": at.isoformat(), "reading": r}) + "\n" for d, at, r in rows))


def _source(seed: int, count: int, days: range) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    return [(rng.randrange(4), START + dt.timedelta(days=rng.choice(days), minutes=rng.randrange(1440)),
             None if rng.random() < 0.1 else float(rng.randrange(40, 180))) for _ in range(count)]


def _expected(rows: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """The aggregation in plain Python: what complete mode would write."""
    groups: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for device, at, reading in rows:
        groups[(device, at.replace(hour=0, minute=0))].append(reading)
    result = {}
    for key, readings in groups.items():
        present = [r for r in readings if r is not None]
        result[key] = (sum(present) / len(present) if present else None, len(present), len(readings),
                       sum(present) if present else None, min(present, default=None), max(present, default=None))
    return result


def _table(path: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert len(rows) == len({(r["device"], r["day"]) for r in rows}), "a group is in the table more than once"
    return {(r["device"], r["day"].replace(tzinfo=None)): tuple(r[c] for c in MEASURES) for r in rows}


def _assert_matches(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for key, values in expected.items():
        mean, *exact = values
        assert actual[key][1:] == tuple(exact), key
        assert (actual[key][0] is None and mean is None) or math.isclose(actual[key][0], mean), key


def test_changed_groups_are_merged_once_through_a_crash_between_commit_and_checkpoint(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    landing, path, checkpoint = tmp_path / "landing", str(tmp_path / "daily"), str(tmp_path / "checkpoint")
    sink = DeltaSink(store, path, output_mode="update", keys=KEYS)

    def run() -> Any:
        return run_stream(lambda: _grouped(landing, spark), sink, checkpoint_location=checkpoint,
                          trigger=Trigger())

    batches = [_source(seed, 60, range(0, 3)) for seed in range(3)] + [_source(9, 40, range(2, 5))]
    _land(landing, "0.json", batches[0])
    _land(landing, "1.json", batches[1])
    first = run()
    assert [c.version for c in first.commits] == [0, 1]
    _assert_matches(_table(path), _expected(batches[0] + batches[1]))

    # Batch 2 is merged, then the run dies before Spark records it done: its state and its
    # offsets' commit are not in the checkpoint. The next run replays it from the state
    # before it; the sink finds it in the table and commits nothing, and batch 3 goes on.
    _land(landing, "2.json", batches[2])
    with raising_at("delta.committed"), pytest.raises(Exception, match="fault injected at delta.committed"):
        run()
    assert [h.batch_id for h in store.history(path)] == [2, 1, 0]
    _land(landing, "3.json", batches[3])
    second = run()

    assert [(c.version, c.batch_id) for c in second.commits] == [(3, 3)]
    _assert_matches(_table(path), _expected([row for batch in batches for row in batch]))
    assert [h.batch_id for h in store.history(path)] == [3, 2, 1, 0]


def test_a_batch_rewrites_only_the_files_holding_its_groups(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    landing, path = tmp_path / "landing", str(tmp_path / "daily")
    # One file landed and read at a time: files landed together may share a modification time,
    # and the file source orders batches by it.
    for batch, day in enumerate([0, 1, 2, 2]):
        _land(landing, f"{batch}.json",
              [(device, START + dt.timedelta(days=day, hours=batch), 60.0 + batch) for device in range(3)])
        run_stream(lambda: _grouped(landing, spark), DeltaSink(store, path, output_mode="update", keys=KEYS),
                   checkpoint_location=str(tmp_path / "checkpoint"), trigger=Trigger())

    files = [set(DeltaTable(path, version=v).file_uris()) for v in range(4)]
    assert files[2] - files[3] == files[2] - files[1], "only the files of day 2's groups are rewritten"
    assert _table(path)[(1, START + dt.timedelta(days=2))][:3] == (62.5, 2, 2)


def test_a_table_kept_by_the_old_incremental_aggregate_is_refused_until_reset(
        spark: SparkSession, store: DeltaTableStore, settings: LakehouseSettings) -> None:
    spec = TableSpec.of(daily_patient_avg.metadata_by_key[daily_patient_avg.key])
    assert spec is not None
    table = TableRef.of(daily_patient_avg.key, settings)
    run = TableRun(table=table, quarantine=None, settings=settings, run_id=None, full_refresh=False,
                   trigger=Trigger(), spec=spec)
    assert isinstance(_kept(run, store), DeltaSink)  # a table never kept the old way

    store.write(spark.range(1), f"{table.path}/_aggregate_state")
    with pytest.raises(LakehouseError, match=r"lakehouse reset gold\.daily_patient_avg --yes"):
        _kept(run, store)
