"""Grouped tables kept incrementally: each batch's partial results merged into the groups it
changes, matching a plain-Python aggregation batch by batch, through replays and crashes, and
rewriting only the files that hold a changed group."""

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
from pyspark.sql import SparkSession

from lakehouse_assets.aggregates import AggregateTable, IncrementalAggregate, Measure
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.storage import AppTransaction, DeltaTableStore
from lakehouse_assets_tests.conftest import spark_jobs
from lakehouse_assets_tests.storage.helpers import drop_commit

SOURCE = "device long, at timestamp, reading double"
SPEC = IncrementalAggregate(
    keys=(("device", "device"), ("day", "DATE_TRUNC('DD', at)")),
    measures=(Measure("mean_reading", "mean", "reading"), Measure("readings", "count", "reading"),
              Measure("rows", "count", "*"), Measure("total", "sum", "reading"),
              Measure("low", "min", "reading"), Measure("high", "max", "reading")),
    columns=("device", "day", "mean_reading", "readings", "rows", "total", "low", "high"),
)
START = dt.datetime(2026, 1, 1)


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
    return {(r["device"], r["day"].replace(tzinfo=None)): tuple(r[c] for c in SPEC.columns[2:]) for r in rows}


def _assert_matches(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for key, values in expected.items():
        mean, *exact = values
        assert actual[key][1:] == tuple(exact), key
        assert (actual[key][0] is None and mean is None) or math.isclose(actual[key][0], mean), key


def _drop_last_commit(table: Path) -> None:
    drop_commit(sorted((table / "_delta_log").glob("*.json"))[-1])


def test_batches_merge_into_the_groups_they_change_through_replays_and_crashes(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "daily")
    table = AggregateTable(store, path, SPEC)
    batches = [_source(seed, 60, range(0, 3)) for seed in range(3)] + [_source(9, 40, range(2, 5))]
    seen: list[tuple[Any, ...]] = []
    for batch_id, batch in enumerate(batches):
        frame = spark.createDataFrame(batch, SOURCE)
        table.apply(frame, AppTransaction("q", batch_id), {})
        with spark_jobs(spark) as replay_jobs:
            table.apply(frame, AppTransaction("q", batch_id), {})  # a replay changes nothing
        assert replay_jobs == [], "a replay of a batch the table and its state hold runs no Spark job"
        if batch_id == 2:
            # A crash after the table's commit, before its state's: the replay commits the state only.
            _drop_last_commit(Path(table.state_path))
            table.apply(frame, AppTransaction("q", batch_id), {})
        seen += batch
        _assert_matches(_table(path), _expected(seen))
    assert [h.batch_id for h in store.history(path)] == [3, 2, 1, 0]


def test_a_batch_rewrites_only_the_files_holding_its_groups(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "daily")
    table = AggregateTable(store, path, SPEC)
    for batch_id, day in enumerate([0, 1, 2, 2]):
        rows = [(device, START + dt.timedelta(days=day, hours=batch_id), 60.0 + batch_id) for device in range(3)]
        table.apply(spark.createDataFrame(rows, SOURCE), AppTransaction("q", batch_id), {})

    log = sorted((Path(path) / "_delta_log").glob("*.json"))
    actions = [json.loads(line) for line in log[-1].read_text().splitlines()]
    removed = [a["remove"]["path"] for a in actions if "remove" in a]
    day_2_files = [a["add"]["path"] for a in json.loads("[" + ",".join(log[2].read_text().splitlines()) + "]")
                   if "add" in a]
    assert sorted(removed) == sorted(day_2_files), "only the files of day 2's groups are rewritten"
    assert _table(path)[(1, START + dt.timedelta(days=2))][:3] == (62.5, 2, 2)


def test_a_table_written_whole_before_is_refused_until_rebuilt(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "daily")
    store.write(spark.createDataFrame([(1, START, 60.0)], "device long, day timestamp, mean_reading double"), path)

    with pytest.raises(LakehouseError, match=rf"{path} has no _aggregate_state.*full refresh"):
        AggregateTable(store, path, SPEC).apply(spark.createDataFrame([(1, START, 60.0)], SOURCE),
                                                AppTransaction("q", 0), {})
