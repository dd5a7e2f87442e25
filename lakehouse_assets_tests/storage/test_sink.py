"""The exactly-once foreachBatch sink: a replayed batch never changes the table twice."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.storage import DeltaSink, DeltaTableStore
from lakehouse_assets.streaming import run_stream

from .helpers import as_query, collected, sort_rows


def test_replayed_batch_id_writes_nothing(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    with as_query(spark) as query_id:
        sink = DeltaSink(store, path)

        first = sink(spark.range(0, 3), 0)
        replay = sink(spark.range(0, 3), 0)
        # A new sink object (a restarted process) recognises the batch from the table alone.
        again = DeltaSink(store, path)(spark.range(0, 3), 0)

    assert [(c.version, c.skipped, c.rows_written) for c in (first, replay, again)] == [
        (0, False, 3), (None, True, 0), (None, True, 0)]
    assert sorted(r.id for r in store.read(spark, path).collect()) == [0, 1, 2]
    assert store.version(path) == 0
    # The batch is Delta's app transaction of the query Spark named: the table's log says so.
    assert store.committed_batch(path, query_id) == 0
    assert [(h.version, h.query, h.batch_id) for h in store.history(path)] == [(0, query_id, 0)]


def test_complete_mode_replaces_the_table(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    sink = DeltaSink(store, path, output_mode="complete")

    with as_query(spark):
        sink(spark.createDataFrame([("a", 1)], "k string, n long"), 0)
        # Complete mode may change the result's schema: it is the whole answer each time.
        sink(spark.createDataFrame([("a", 2.5), ("b", 1.0)], "k string, n double"), 1)
        sink(spark.createDataFrame([("stale", 0.0)], "k string, n double"), 1)  # replay

    assert collected(store.read(spark, path)) == [{"k": "a", "n": 2.5}, {"k": "b", "n": 1.0}]
    assert store.history(path)[0].parameters["mode"] == "Overwrite"


def test_update_mode_merges_on_keys(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    sink = DeltaSink(store, path, output_mode="update", keys=["k"])

    with as_query(spark):
        sink(spark.createDataFrame([("a", 1), ("b", 1)], "k string, n long"), 0)
        sink(spark.createDataFrame([("b", 2), ("c", 1)], "k string, n long"), 1)
        sink(spark.createDataFrame([("b", 99)], "k string, n long"), 1)  # replay

    assert collected(store.read(spark, path)) == sort_rows(
        [{"k": "a", "n": 1}, {"k": "b", "n": 2}, {"k": "c", "n": 1}]
    )
    assert [h.batch_id for h in store.history(path)] == [1, 0]


def test_sink_configuration_errors(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    with pytest.raises(LakehouseError, match="Unknown output mode 'upsert'"):
        DeltaSink(store, str(tmp_path / "t"), output_mode="upsert")  # type: ignore[arg-type]
    with pytest.raises(LakehouseError, match="needs key columns"):
        DeltaSink(store, str(tmp_path / "t"), output_mode="update")
    # Called outside a streaming query, a batch has no query to be named by: nothing is written.
    with pytest.raises(LakehouseError, match="no id to name its commits by"):
        DeltaSink(store, str(tmp_path / "t"))(spark.range(0, 1), 0)
    assert store.version(str(tmp_path / "t")) is None


def _land(folder: Path, name: str, ids: range) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))


def test_crash_between_delta_commit_and_checkpoint_commit_writes_no_duplicates(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    landing, path, checkpoint = tmp_path / "landing", str(tmp_path / "t"), str(tmp_path / "checkpoint")

    def build() -> DataFrame:
        return spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(landing))

    _land(landing, "a.json", range(0, 3))
    _land(landing, "b.json", range(3, 5))
    first = run_stream(build, DeltaSink(store, path), checkpoint_location=checkpoint)
    assert [c.version for c in first.commits] == [0, 1]

    # Crash after the Delta commit of batch 1 but before Spark marked it done: the checkpoint
    # has the batch's offsets but not its commit entry (nor the entry's checksum file).
    # The batch is the last one Delta's app transaction of the query records.
    assert first.query_id is not None
    last = store.committed_batch(path, first.query_id)
    assert last == 1
    commits = Path(checkpoint) / "commits"
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    _land(landing, "c.json", range(5, 7))

    second = run_stream(build, DeltaSink(store, path), checkpoint_location=checkpoint)

    # Spark replayed batch 1; the sink recognised it and wrote nothing; batch 2 went on. The
    # second run's commits, read back from the log, are batch 2's alone.
    assert second.query_id == first.query_id
    assert [(c.version, c.rows_written) for c in second.commits] == [(2, 2)]
    assert sorted(r.id for r in store.read(spark, path).collect()) == list(range(7))
    history = store.history(path)
    assert [(h.version, h.batch_id, h.rows_written) for h in history] == [(2, 2, 2), (1, 1, 2), (0, 0, 3)]
    assert {h.query for h in history} == {first.query_id}
    assert store.committed_batch(path, first.query_id) == 2


def test_a_query_whose_python_worker_did_not_start_in_time_is_restarted_and_writes_each_row_once(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    @dataclass
    class WorkerLateOnce(DeltaSink):
        """The sink, failing its first call as a query fails whose ``foreachBatch`` Python
        worker did not connect back in time (Spark's words; its 10 s wait cannot be provoked on
        demand). Which call is first is kept on disk: on an engine the sink runs in the
        engine's worker, which unpickles this class by value (it is local)."""

        failed_marker: str = ""

        def __call__(self, batch_df, batch_id, commit_metadata=None):  # type: ignore[no-untyped-def]
            import pyspark

            marker = Path(self.failed_marker)
            if not marker.exists():
                # Where the worker's pyspark came from: an engine's workers import the installed
                # package (bytecode cached), not the zip Spark puts on their path (compiled each start).
                marker.write_text(pyspark.__file__ or "")
                raise RuntimeError("Python worker failed to connect back.")
            return super().__call__(batch_df, batch_id, commit_metadata)

    landing, path, checkpoint = tmp_path / "landing", str(tmp_path / "t"), str(tmp_path / "checkpoint")
    _land(landing, "a.json", range(0, 3))
    _land(landing, "b.json", range(3, 5))
    sink = WorkerLateOnce(store, path, failed_marker=str(tmp_path / "failed_once"))

    run = run_stream(lambda: spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(landing)),
                     sink, checkpoint_location=checkpoint)

    assert (tmp_path / "failed_once").exists(), "the sink never failed: nothing was restarted"
    assert ".zip" not in (tmp_path / "failed_once").read_text(), "the worker compiled pyspark from Spark's zip"
    assert run.restarts == 1
    assert sorted(r.id for r in store.read(spark, path).collect()) == list(range(5))
    assert [h.batch_id for h in store.history(path)] == [1, 0]
