"""History: what each version did, when, with how many rows, and which query batch wrote it."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from lakehouse_assets.storage import DeltaSink, DeltaTableStore
from lakehouse_assets.storage.history import NEWEST_COMMITS, newest_first
from lakehouse_assets.storage.sink import RunStamp

from .helpers import as_query


def test_history_describes_every_version(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    store.write(spark.range(0, 4), path, metadata={"lakehouse.asset": "silver.t"})
    store.write(spark.range(4, 6), path, mode="append")
    store.merge(spark.createDataFrame([(1,), (10,)], "id long"), path, keys=["id"])
    store.write(spark.range(0, 3), path, mode="overwrite", operation="FULL REFRESH")
    after = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)

    history = store.history(path)
    assert [h.version for h in history] == [3, 2, 1, 0]  # newest first
    assert [h.operation for h in history] == ["FULL REFRESH", "MERGE", "WRITE", "WRITE"]
    assert [h.rows_written for h in history] == [3, 1, 2, 4]  # merge: id 1 as it was, 10 inserted
    for entry in history:
        assert entry.timestamp.tzinfo is not None and before <= entry.timestamp <= after
        assert entry.query is None and entry.batch_id is None
    assert [h.timestamp for h in history] == sorted((h.timestamp for h in history), reverse=True)

    refresh, merge, append, _create = history
    assert refresh.parameters["mode"] == "Overwrite"
    assert append.parameters["mode"] == "Append"
    assert merge.custom_metadata["lakehouse.mergeKeys"] == '["id"]'
    assert "predicate" in merge.parameters  # Delta's own MERGE
    # Custom metadata lands in the commit (Delta's userMetadata), where any Delta reader finds it.
    assert json.loads(DeltaTable(path).history()[-1]["userMetadata"])["lakehouse.asset"] == "silver.t"

    assert [h.version for h in store.history(path, limit=2)] == [3, 2]


def test_history_names_the_query_and_batch_a_sink_wrote(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    sink = DeltaSink(store, path).for_run(RunStamp("run-1"))
    with as_query(spark) as query_id:
        sink(spark.range(0, 3), 0)
        sink(spark.range(3, 5), 1)
        sink(spark.range(3, 5), 1)  # replay: no new version

    history = store.history(path)
    assert [(h.version, h.query, h.batch_id, h.rows_written) for h in history] == [
        (1, query_id, 1, 2),
        (0, query_id, 0, 3),
    ]
    assert {h.operation for h in history} == {"STREAMING UPDATE"}
    # Each commit names the run that made it and when its batch started; the run's commits are
    # read back from the log, oldest first.
    assert {h.run_id for h in history} == {"run-1"}
    for entry in history:
        assert entry.started_at is not None and entry.started_at <= entry.timestamp
    assert [h.version for h in sink.run_commits()] == [0, 1]


def test_newest_first_reads_past_the_newest_commits_without_repeating_one(
        store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    assert list(newest_first(store, path)) == []  # no table yet
    for n in range(NEWEST_COMMITS + 5):
        write_deltalake(path, pa.table({"id": [n]}), mode="append")
    versions = [entry.version for entry in newest_first(store, path)]
    assert versions == list(range(NEWEST_COMMITS + 4, -1, -1))
    # Stopping early reads no further than asked.
    stream = newest_first(store, path)
    assert [next(stream).version for _ in range(3)] == [NEWEST_COMMITS + 4, NEWEST_COMMITS + 3, NEWEST_COMMITS + 2]
