"""A stream reading a table across its compaction and VACUUM sees every row exactly once, and
VACUUM waits for the stream to read what it would delete."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.errors import VacuumRefusedError
from lakehouse_assets.storage import DeltaSink, DeltaTableStore, StreamOptions, StreamReader, TableLayout
from lakehouse_assets.streaming import StreamRun, run_stream

NO_TIME = dt.timedelta(0)


def _append(spark: SparkSession, store: DeltaTableStore, path: str, ids: range) -> None:
    """One commit of one data file."""
    store.write(spark.createDataFrame([(i,) for i in ids], "id long").coalesce(1), path)


def _stream(spark: SparkSession, store: DeltaTableStore, root: Path, target: str = "copy") -> StreamRun:
    """The query bronze.events -> silver.<target> once (availableNow), checkpointed where the
    lakehouse keeps checkpoints."""
    checkpoint = str(root / "_checkpoints" / "silver" / target)
    sink = DeltaSink(store, str(root / "silver" / target))
    return run_stream(lambda: store.read_stream(spark, str(root / "bronze" / "events"), StreamOptions()), sink,
                      checkpoint_location=checkpoint)


def _target_ids(spark: SparkSession, store: DeltaTableStore, root: Path, target: str = "copy") -> Counter[int]:
    return Counter(r.id for r in store.read(spark, str(root / "silver" / target)).collect())


def test_a_stream_across_optimize_and_vacuum_reads_each_row_once(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    root = tmp_path / "lakehouse"
    source = str(root / "bronze" / "events")
    _append(spark, store, source, range(0, 3))
    _append(spark, store, source, range(3, 5))
    # An availableNow query reads at least the versions there when it starts, which is what
    # its table's commits record (the run's reading).
    readers = [StreamReader("silver.copy", store.version(source), "checkpoint")]
    _stream(spark, store, root)
    _append(spark, store, source, range(5, 7))
    _append(spark, store, source, range(7, 8))

    compacted = store.optimize(spark, source)

    assert (compacted.files_removed, compacted.files_added) == (4, 1)
    # The stream has yet to read versions 2 and 3, whose files the compaction removed: VACUUM
    # refuses to delete them, naming the reader.
    with pytest.raises(VacuumRefusedError, match="silver.copy"):
        store.vacuum(spark, source, retention=NO_TIME, dry_run=False, readers=readers)

    _append(spark, store, source, range(8, 10))
    readers = [StreamReader("silver.copy", store.version(source), "checkpoint")]
    second = _stream(spark, store, root)

    # The compaction's commit gave the stream nothing: it read versions 2, 3 and 5 once each.
    assert sum(p["numInputRows"] for p in second.progress) == 5
    assert _target_ids(spark, store, root) == Counter(range(10))

    # Caught up, the reader needs none of the compacted-away files: VACUUM deletes them all.
    vacuumed = store.vacuum(spark, source, retention=NO_TIME, dry_run=False, readers=readers)
    assert len(vacuumed.files) == 4
    _append(spark, store, source, range(10, 12))
    third = _stream(spark, store, root)

    assert sum(p["numInputRows"] for p in third.progress) == 2
    assert _target_ids(spark, store, root) == Counter(range(12))
    # A new stream starts from the compacted snapshot: every row once.
    _stream(spark, store, root, target="fresh")
    assert _target_ids(spark, store, root, "fresh") == Counter(range(12))


def test_the_stores_commits_write_a_log_checkpoint_every_interval(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    """Opening a table reads its last checkpoint and the commits after it: the store's commits
    keep delta-rs's post-commit hook, a checkpoint every delta.checkpointInterval commits
    (100 by default; 5 here)."""
    path = str(tmp_path / "events")
    log = tmp_path / "events" / "_delta_log"
    for batch in range(6):
        store.write(spark.createDataFrame([(batch,)], "id long"), path,
                    layout=TableLayout({"delta.checkpointInterval": "5"}))

    checkpoints = sorted(p.name for p in log.glob("*.checkpoint.parquet"))
    assert checkpoints, f"no log checkpoint after 6 commits: {sorted(p.name for p in log.iterdir())}"
    assert json.loads((log / "_last_checkpoint").read_text())["version"] >= 4
