"""What was ingested, file by file (cloud_files_state), read from a checkpoint's file log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.checkpoints.checkpoint import Checkpoint
from lakehouse_assets.errors import CorruptCheckpointError
from lakehouse_assets.ingestion import AutoLoaderOptions, ingested_files, unread_files
from lakehouse_assets.ingestion.state import uncommitted_files
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets_tests.cli.helpers import hadoop_checksum

from .helpers import Bronze, by_source, file_uri, json_lines, recording


def _write_log(folder: Path, name: str, entries: list[tuple[str, int]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": p, "timestamp": 1_700_000_000_000, "batchId": b}) for p, b in entries]
    (folder / name).write_text("\n".join(lines))


def test_a_compacted_log_and_the_batches_after_it(tmp_path: Path) -> None:
    log = tmp_path / "sources" / "0"
    _write_log(log, "8", [("file:///l/8.json", 8)])  # superseded by the compaction, may linger
    _write_log(log, "9.compact", [(f"file:///l/{b}.json", b) for b in range(10)])
    _write_log(log, "10", [("file:///l/10.json", 10)])
    _write_log(log, "11", [("file:///l/11a.json", 11), ("file:///l/11b.json", 11)])
    (log / ".11.crc").write_bytes(hadoop_checksum((log / "11").read_bytes()))  # a checksum is not a batch
    (tmp_path / "commits").mkdir()
    for batch in range(11):
        (tmp_path / "commits" / str(batch)).write_text("v1\n{}")

    entries = Checkpoint(str(tmp_path)).file_source_log()
    state = ingested_files(str(tmp_path))

    assert [e.batch_id for e in entries] == [*range(11), 11, 11]
    assert uncommitted_files(str(tmp_path)) == ["file:///l/11a.json", "file:///l/11b.json"]
    assert [f.path for f in state][:2] == ["file:/l/0.json", "file:/l/1.json"]
    assert [f.committed for f in state] == [True] * 11 + [False, False]
    assert all(f.size is None and f.table_version is None for f in state)  # files gone, no table given


def test_a_damaged_log_is_named(tmp_path: Path) -> None:
    (tmp_path / "sources" / "0").mkdir(parents=True)
    (tmp_path / "sources" / "0" / "0").write_text("not a log")
    with pytest.raises(CorruptCheckpointError, match="sources/0/0"):
        ingested_files(str(tmp_path))


def test_each_file_maps_to_the_table_version_that_holds_it(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    bronze = Bronze(spark, settings, store)
    for i in range(3):
        bronze.land(f"{i}.json", json_lines([recording(i), recording(10 + i)]))
    bronze.run(AutoLoaderOptions(max_files_per_trigger=2))
    bronze.land("3.json", json_lines([recording(3)]))
    bronze.run()

    state = ingested_files(bronze.checkpoint, table_path=bronze.table, store=store)
    history = {e.batch_id: e.version for e in store.history(bronze.table) if e.batch_id is not None}
    assert [f.batch_id for f in state] == [0, 0, 1, 2]
    assert [f.table_version for f in state] == [history[0], history[0], history[1], history[2]]
    sources = by_source(bronze.rows())
    assert sorted(f.path for f in state) == sorted(sources)
    # A file's rows first appear in the version its state names.
    for f in state:
        before = store.read(spark, bronze.table, version=f.table_version - 1) if f.table_version else None
        assert before is None or before.where(f"_source_file = '{f.path}'").count() == 0
    assert [len(sources[f.path]) for f in state] == [2, 2, 2, 1]
    assert all(f.seen_at is not None and f.seen_at >= f.modification_time for f in state)
    # What a run would read now, without starting one.
    assert unread_files(str(bronze.landing), bronze.checkpoint, AutoLoaderOptions()) == []
    late = bronze.land("4.json", json_lines([recording(4)]))
    assert [f.path for f in unread_files(str(bronze.landing), bronze.checkpoint, AutoLoaderOptions())] == [file_uri(late)]
