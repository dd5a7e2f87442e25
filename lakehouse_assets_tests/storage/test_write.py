"""Appends and overwrites: what is read back, what a failed write leaves, and where writes refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.errors import LakehouseError, NotADeltaTableError, TableNotFoundError
from lakehouse_assets.storage import AppTransaction, DeltaTableStore

from ..conftest import TEST_JVM_OPTIONS
from .helpers import ALL_TYPES_ROWS, ALL_TYPES_SCHEMA, collected, expected, fields, sort_rows


def _ids(spark: SparkSession, store: DeltaTableStore, path: str) -> list[int]:
    return sorted(r["id"] for r in store.read(spark, path).collect())


def _parquet_files_on_disk(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet")}


def test_every_type_round_trips(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "types")
    result = store.write(spark.createDataFrame(ALL_TYPES_ROWS, ALL_TYPES_SCHEMA), path)

    back = store.read(spark, path)
    assert fields(back.schema) == fields(ALL_TYPES_SCHEMA)
    assert collected(back) == expected(ALL_TYPES_ROWS, ALL_TYPES_SCHEMA)
    assert (result.version, result.rows_written, result.skipped) == (0, len(ALL_TYPES_ROWS), False)
    assert fields(store.schema(path)) == fields(ALL_TYPES_SCHEMA)


def test_append_adds_rows_in_a_new_version(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    first = store.write(spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string"), path)
    second = store.write(spark.createDataFrame([(3, "c")], "id long, v string"), path, mode="append")

    assert (first.version, second.version) == (0, 1)
    assert second.rows_written == 1
    assert collected(store.read(spark, path)) == sort_rows([
        {"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}
    ])
    assert store.version(path) == 1 and store.exists(path)


def test_overwrite_replaces_all_rows(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    store.write(spark.range(0, 5), path)
    store.write(spark.range(5, 7), path)
    result = store.write(spark.range(100, 102), path, mode="overwrite")

    assert result.version == 2 and result.rows_written == 2
    assert _ids(spark, store, path) == [100, 101]
    # The replaced rows are no longer part of the table, as delta-rs sees it too.
    assert sorted(DeltaTable(path).to_pyarrow_table()["id"].to_pylist()) == [100, 101]


def test_overwrite_with_no_rows_empties_the_table(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    store.write(spark.range(3), path)
    result = store.write(spark.range(0), path, mode="overwrite")

    assert result.version == 1 and result.rows_written == 0
    assert store.read(spark, path).count() == 0


def test_appending_no_rows_commits_nothing(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    store.write(spark.range(3), path)
    result = store.write(spark.range(0), path)

    assert result.version is None and result.rows_written == 0 and not result.skipped
    assert store.version(path) == 0


def test_an_empty_batch_of_a_query_still_records_its_transaction(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    # The table must say which batch its query reached even when a batch had no rows (the
    # quarantine's usual case): checkpoints are checked against, and rebuilt from, it.
    path = str(tmp_path / "t")
    store.write(spark.range(3), path, transaction=AppTransaction("query-a", 0))
    result = store.write(spark.range(0), path, transaction=AppTransaction("query-a", 1))

    assert result.version == 1 and result.rows_written == 0
    assert store.committed_batch(path, "query-a") == 1
    assert store.read(spark, path).count() == 3


def test_first_write_of_no_rows_creates_an_empty_table(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    result = store.write(spark.createDataFrame([], "id long, name string"), path)

    assert result.version == 0 and store.exists(path)
    back = store.read(spark, path)
    assert back.count() == 0
    assert fields(back.schema) == [("id", "bigint"), ("name", "string")]


def test_unknown_mode_is_refused(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    with pytest.raises(LakehouseError, match="Unknown write mode 'upsert'"):
        store.write(spark.range(1), path, mode="upsert")  # type: ignore[arg-type]
    assert not store.exists(path)


def test_transaction_makes_a_batch_commit_once(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    first = store.write(spark.range(0, 3), path, transaction=AppTransaction("query-a", 0))
    replay = store.write(spark.range(0, 3), path, transaction=AppTransaction("query-a", 0))
    older = store.write(spark.range(50, 53), path, transaction=AppTransaction("query-a", -1))
    other_query = store.write(spark.range(10, 11), path, transaction=AppTransaction("query-b", 0))
    next_batch = store.write(spark.range(3, 4), path, transaction=AppTransaction("query-a", 1))

    assert first.version == 0 and not first.skipped
    assert replay == older
    assert replay.skipped and replay.version is None and replay.rows_written == 0
    assert (other_query.version, next_batch.version) == (1, 2)
    assert _ids(spark, store, path) == [0, 1, 2, 3, 10]
    assert store.committed_batch(path, "query-a") == 1
    assert store.committed_batch(path, "query-b") == 0
    assert store.committed_batch(path, "query-c") is None
    assert store.committed_batch(str(tmp_path / "missing"), "query-a") is None


def test_writing_into_a_non_delta_folder_names_the_path(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    folder = tmp_path / "csv_export"
    folder.mkdir()
    (folder / "rows.csv").write_text("id\n1\n")

    with pytest.raises(NotADeltaTableError) as caught:
        store.write(spark.range(3), str(folder))
    assert str(folder) in str(caught.value) and "not a Delta table" in str(caught.value)
    assert sorted(p.name for p in folder.iterdir()) == ["rows.csv"]
    with pytest.raises(NotADeltaTableError, match=str(folder)):
        store.merge(spark.range(3), str(folder), keys=["id"])


def _poisoned(spark: SparkSession):
    """Rows whose computation fails at row 7, in the middle of the write job. (The UDF is
    defined here so that it is pickled by value: workers need not import this module.)"""

    def fail_on_seven(value):
        if value == 7:
            raise ValueError("row 7 is poisoned")
        return value

    poison = F.udf(fail_on_seven, "long")
    # Two tasks: the one without row 7 may finish and write its file before the job fails.
    return spark.range(0, 20, numPartitions=2).select(poison("id").alias("id"))


def test_failed_write_leaves_the_table_unchanged(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    table = tmp_path / "t"
    path = str(table)
    store.write(spark.range(100, 103), path)
    files_before = {Path(uri).name for uri in DeltaTable(path).file_uris()}

    with pytest.raises(Exception, match="row 7 is poisoned"):
        store.write(_poisoned(spark), path)

    assert store.version(path) == 0
    assert _ids(spark, store, path) == [100, 101, 102]
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == [100, 101, 102]
    # Files the failed job's finished tasks wrote may stay on disk, but the log lists none.
    assert {Path(uri).name for uri in DeltaTable(path).file_uris()} == files_before


def test_failed_first_write_creates_no_table_and_can_be_retried(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    with pytest.raises(Exception, match="row 7 is poisoned"):
        store.write(_poisoned(spark), path)

    assert not store.exists(path)
    with pytest.raises(TableNotFoundError, match=path):
        store.read(spark, path)
    result = store.write(spark.range(0, 3), path)
    assert result.version == 0
    assert _ids(spark, store, path) == [0, 1, 2]


def test_drop_deletes_the_table(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    store.write(spark.range(3), path)
    store.drop(path)
    assert not store.exists(path) and store.version(path) is None
    assert not Path(path).exists()
    store.drop(path)  # dropping what is not there is not an error
    assert store.write(spark.range(2), path).version == 0


# A writer process killed in the middle of its write job, in two threads: one appending to an
# existing table, one creating a table. One task of each job writes its file, the other stops
# on a row and says so; the test then kills the process with SIGKILL.
_KILLED_WRITER = r"""
import os, sys, threading, time
from pyspark.sql import functions as F
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark import build_spark_session
from lakehouse_assets.storage import DeltaTableStore

existing, new, marks = sys.argv[1], sys.argv[2], sys.argv[5]

def stop_at_1099(value):
    if value == 1099:
        open(os.path.join(marks, str(os.getpid())), "w").close()
        time.sleep(3600)
    return value

settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": sys.argv[3], "LAKEHOUSE_SPARK_CONF": sys.argv[4],
                                       "LAKEHOUSE_SPARK_MASTER": "local[4]"})
spark = build_spark_session(settings, app_name="killed_writer")
stop = F.udf(stop_at_1099, "long")
store = DeltaTableStore()
for path in (existing, new):
    rows = spark.range(1000, 1100, numPartitions=2).select(stop("id").alias("id"))
    threading.Thread(target=store.write, args=(rows, path), daemon=True).start()
threading.Event().wait()
"""


@pytest.mark.slow
def test_writer_killed_between_writing_files_and_committing(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    existing, new = tmp_path / "existing", tmp_path / "new"
    store.write(spark.range(0, 3), str(existing))
    files_before = _parquet_files_on_disk(existing)

    marks = tmp_path / "marks"
    marks.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(existing), str(new), str(tmp_path / "root"),
         json.dumps({"spark.driver.memory": "512m", "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS}), str(marks)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
        # An embedded writer whose JVM dies with it, whichever engine the suite runs on.
        env={k: v for k, v in os.environ.items()
             if k not in ("LAKEHOUSE_SPARK_REMOTE", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")},
    )
    try:
        deadline = time.monotonic() + 300
        # Both jobs are stopped on their last row, and their other task's file is written.
        while not (len(list(marks.iterdir())) >= 2 and len(_parquet_files_on_disk(existing)) > len(files_before)
                   and list(new.rglob("*.parquet"))):
            assert time.monotonic() < deadline, "the writer process never got into its write jobs"
            time.sleep(0.5)
    finally:
        # The child's session holds the child and its JVM, both started by this test.
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL

    # The killed write had written its data files...
    assert len(_parquet_files_on_disk(existing)) > len(files_before)
    assert list(new.rglob("*.parquet"))
    # ...but no reader sees them.
    assert store.version(str(existing)) == 0
    assert _ids(spark, store, str(existing)) == [0, 1, 2]
    assert sorted(DeltaTable(str(existing)).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2]
    assert not store.exists(str(new))
    with pytest.raises(TableNotFoundError):
        store.read(spark, str(new))
    # The retry of the first write is not refused because of the killed write's files.
    assert store.write(spark.range(5, 7), str(new)).version == 0
    assert _ids(spark, store, str(new)) == [5, 6]
