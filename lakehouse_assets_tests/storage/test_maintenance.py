"""Compaction and VACUUM through Delta Lake: rows unchanged, dataChange=false in the commit,
files deleted only past the retention and never under a streaming reader that still needs them.

Tables are written with delta-rs, as another writer would (Delta Lake maintains them all the
same); readers are given at the version they have read whole, as their tables' last
materializations record it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from lakehouse_assets.errors import LakehouseError, VacuumRefusedError
from lakehouse_assets.storage import DeltaTableStore, StreamReader

NO_TIME = dt.timedelta(0)


def _table(path: Path, batches: list[list[int]]) -> str:
    """One commit (one file) per batch of ids; ``k`` runs against ``id``."""
    for ids in batches:
        write_deltalake(str(path), pa.table({"id": pa.array(ids, pa.int64()), "k": pa.array([-i for i in ids])}),
                        mode="append")
    return str(path)


def _commit_actions(path: str, version: int) -> list[dict]:
    lines = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _ids(path: str) -> list[int]:
    return sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist())


def test_compaction_keeps_the_rows_and_commits_without_data_change(spark: SparkSession, tmp_path: Path) -> None:
    store = DeltaTableStore()
    path = _table(tmp_path / "t", [[1, 2], [3], [4, 5, 6], [7]])

    result = store.optimize(spark, path)

    assert (result.version, result.files_removed, result.files_added) == (4, 4, 1)
    assert result.bytes_removed > 0 and result.bytes_added > 0
    assert _ids(path) == [1, 2, 3, 4, 5, 6, 7]
    actions = _commit_actions(path, 4)
    changes = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
    assert len(changes) == 5 and all(change["dataChange"] is False for change in changes)
    # Nothing left to compact: no commit.
    assert store.optimize(spark, path).version is None and store.version(path) == 4


def test_z_order_clusters_the_files_by_the_column(spark: SparkSession, tmp_path: Path) -> None:
    store = DeltaTableStore()
    # k = -id: files written in id order hold k descending; Z-order on k rewrites them ascending.
    path = _table(tmp_path / "t", [[i, i + 1] for i in range(0, 40, 2)])

    result = store.optimize(spark, path, z_order=["K"])

    assert result.z_order == ("k",) and result.files_removed == 20
    assert _ids(path) == list(range(40))
    [optimized] = [a["commitInfo"] for a in _commit_actions(path, result.version) if "commitInfo" in a]
    assert json.loads(optimized["operationParameters"]["zOrderBy"]) == ["k"]
    with pytest.raises(LakehouseError, match=r"no such column .*id, k"):
        store.optimize(spark, path, z_order=["missing"])


def test_vacuum_dry_run_lists_and_then_deletes_only_files_past_the_retention(spark: SparkSession, tmp_path: Path) -> None:
    store = DeltaTableStore()
    path = _table(tmp_path / "t", [[1], [2], [3]])
    old_files = {Path(f).name for f in DeltaTable(path).file_uris()}
    store.optimize(spark, path)

    # The compacted-away files were removed just now: a week's retention keeps them.
    assert store.vacuum(spark, path, retention=dt.timedelta(days=7), dry_run=False, readers=[]).files == ()
    dry = store.vacuum(spark, path, retention=NO_TIME, dry_run=True, readers=[])
    assert set(dry.files) == old_files and dry.bytes > 0
    assert all((Path(path) / name).exists() for name in old_files)

    done = store.vacuum(spark, path, retention=NO_TIME, dry_run=False, readers=[])

    assert set(done.files) == old_files and done.bytes == dry.bytes
    assert not any((Path(path) / name).exists() for name in old_files)
    assert _ids(path) == [1, 2, 3]


def test_vacuum_refuses_to_delete_files_a_streaming_reader_has_yet_to_read(spark: SparkSession, tmp_path: Path) -> None:
    store = DeltaTableStore()
    path = _table(tmp_path / "t", [[1], [2], [3]])
    readers = [StreamReader("silver.reader", 0, "ckpt")]  # read version 0; versions 1 and 2 still to read
    store.optimize(spark, path)

    with pytest.raises(VacuumRefusedError) as refused:
        store.vacuum(spark, path, retention=NO_TIME, dry_run=False, readers=readers)

    message = str(refused.value)
    assert "silver.reader" in message and path in message and "at least 1 hours" in message
    assert "Nothing was deleted" in message
    assert len(store.vacuum(spark, path, retention=NO_TIME, dry_run=True, readers=[]).files) == 3
    # The retention it names is enough.
    assert store.vacuum(spark, path, retention=dt.timedelta(hours=1), dry_run=False, readers=readers).files == ()


def test_vacuum_goes_ahead_once_the_reader_has_read_what_it_deletes(spark: SparkSession, tmp_path: Path) -> None:
    store = DeltaTableStore()
    path = _table(tmp_path / "t", [[1], [2], [3]])
    readers = [StreamReader("silver.reader", 2, "ckpt")]  # read everything
    store.optimize(spark, path)

    assert len(store.vacuum(spark, path, retention=NO_TIME, dry_run=False, readers=readers).files) == 3


def test_a_reader_with_no_record_of_what_it_read_stops_a_vacuum_that_deletes_anything(
        spark: SparkSession, tmp_path: Path) -> None:
    store = DeltaTableStore()
    path = _table(tmp_path / "t", [[1], [2]])
    unknown = [StreamReader("silver.reader", None, "ckpt")]

    # Nothing to delete: nothing to refuse.
    assert store.vacuum(spark, path, retention=NO_TIME, dry_run=False, readers=unknown).files == ()
    store.optimize(spark, path)
    with pytest.raises(VacuumRefusedError, match=r"silver\.reader.*no materialization of silver\.reader records"):
        store.vacuum(spark, path, retention=NO_TIME, dry_run=False, readers=unknown)
    assert len(store.vacuum(spark, path, retention=NO_TIME, dry_run=True, readers=[]).files) == 2


def test_vacuum_finds_files_whose_removal_left_the_log_checkpoints(spark: SparkSession, tmp_path: Path) -> None:
    store = DeltaTableStore()
    path = _table(tmp_path / "t", [[1], [2], [3]])
    old_files = {Path(f).name for f in DeltaTable(path).file_uris()}
    store.optimize(spark, path)
    # As a week on: the removals' records (tombstones) have expired from the log checkpoint
    # (here at once, by a zero delta.deletedFileRetentionDuration), and the files were last
    # modified eight days ago. Only their age on disk says they are old enough to go.
    eight_days_ago = dt.datetime.now().timestamp() - 8 * 86400
    DeltaTable(path).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 0 seconds"})
    DeltaTable(path).create_checkpoint()
    for name in old_files:
        os.utime(Path(path) / name, (eight_days_ago, eight_days_ago))
    debris = Path(path) / "part-00000-0123-c000.snappy.parquet"  # a failed write's file, never committed
    debris.write_bytes(b"x")
    os.utime(debris, (eight_days_ago, eight_days_ago))
    state = Path(path) / "_cdc_state"  # a state table inside the table: never touched
    write_deltalake(str(state), pa.table({"x": [1]}))
    write_deltalake(str(state), pa.table({"x": [2]}), mode="overwrite")

    done = store.vacuum(spark, path, retention=dt.timedelta(days=7), dry_run=False, readers=[])

    assert set(done.files) == old_files | {debris.name}
    assert _ids(path) == [1, 2, 3]
    assert DeltaTable(str(state)).to_pyarrow_table().column("x").to_pylist() == [2]
    assert len(list(state.glob("*.parquet"))) == 2


def test_vacuum_keeps_what_is_younger_than_the_retention_asked_for(spark: SparkSession, tmp_path: Path) -> None:
    """Delta 4.4 ignores a RETAIN other than 0 hours unless told not to: 1 and 3 hours differ."""
    store = DeltaTableStore()
    path = _table(tmp_path / "t", [[1]])
    debris = Path(path) / "part-00000-0456-c000.snappy.parquet"  # a failed write's file, two hours old
    debris.write_bytes(b"x")
    two_hours_ago = dt.datetime.now().timestamp() - 7200
    os.utime(debris, (two_hours_ago, two_hours_ago))

    assert store.vacuum(spark, path, retention=dt.timedelta(hours=3), dry_run=True, readers=[]).files == ()
    assert store.vacuum(spark, path, retention=dt.timedelta(hours=1), dry_run=True, readers=[]).files == (debris.name,)


def test_a_change_feed_reader_keeps_the_change_files_it_has_yet_to_read(spark: SparkSession, tmp_path: Path) -> None:
    store = DeltaTableStore()
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, v STRING) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a'), (2, 'b')")  # version 1
    spark.sql(f"UPDATE delta.`{path}` SET v = 'c' WHERE id = 1")  # version 2: a change file, a file rewritten
    changes = [p.name for p in (Path(path) / "_change_data").iterdir()]
    assert changes, "the update wrote no change data file"

    with pytest.raises(VacuumRefusedError, match=r"has yet to read 2 of the 2 files"):
        store.vacuum(spark, path, retention=NO_TIME, dry_run=True, readers=[StreamReader("gold.changes", 1, "ckpt")])
    done = store.vacuum(spark, path, retention=NO_TIME, dry_run=False, readers=[StreamReader("gold.changes", 2, "ckpt")])
    assert len(done.files) == 2 and any(f.startswith("_change_data/") for f in done.files)
