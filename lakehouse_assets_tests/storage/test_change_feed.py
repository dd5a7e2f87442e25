"""The change data feed: tables changed in place (Delta's MERGE) record only the rows they
change, which delta-rs's ``load_cdf`` reads as Delta's ``readChangeFeed`` streams them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.storage import AppTransaction, DeltaSink, DeltaTableStore, StreamOptions, TableLayout
from lakehouse_assets.storage.delta import CHANGE_DATA_FEED
from lakehouse_assets.streaming import run_stream

SCHEMA = "id long, name string"
FEED = {CHANGE_DATA_FEED: "true"}
Change = tuple[Any, ...]


def _load_cdf(path: str, starting_version: int = 0) -> list[Change]:
    """The table's change feed as delta-rs, another Delta reader, reads it."""
    table = pa.table(DeltaTable(path).load_cdf(starting_version=starting_version).read_all())
    data = [c for c in table.column_names if not c.startswith("_")]
    return sorted(tuple([r["_commit_version"], r["_change_type"], *[r[c] for c in data]])
                  for r in table.to_pylist())


def _actions(path: str, version: int) -> list[dict[str, Any]]:
    with open(f"{path}/_delta_log/{version:020d}.json", encoding="utf-8") as log:
        return [json.loads(line) for line in log if line.strip()]


@pytest.fixture(scope="module")
def merged(spark: SparkSession, store: DeltaTableStore, tmp_path_factory: pytest.TempPathFactory) -> str:
    """v0: ann, bob, cid in one file; v1: merge bob -> BOB and dan; v2: merge cid unchanged.
    Tests only read it."""
    path = str(tmp_path_factory.mktemp("feed") / "people")
    store.write(spark.createDataFrame([(1, "ann"), (2, "bob"), (3, "cid")], SCHEMA).coalesce(1), path,
                layout=TableLayout(FEED))
    store.merge(spark.createDataFrame([(2, "BOB"), (4, "dan")], SCHEMA), path, keys=["id"],
                transaction=AppTransaction("q", 0))
    store.merge(spark.createDataFrame([(3, "cid")], SCHEMA), path, keys=["id"], transaction=AppTransaction("q", 1))
    return path


def test_a_merge_records_only_the_rows_it_changed(merged: str) -> None:
    assert _load_cdf(merged) == sorted([
        (0, "insert", 1, "ann"), (0, "insert", 2, "bob"), (0, "insert", 3, "cid"),
        # The merge rewrote the file holding ann and cid too; they are not changes.
        (1, "update_preimage", 2, "bob"), (1, "update_postimage", 2, "BOB"), (1, "insert", 4, "dan"),
    ])
    merge = _actions(merged, 1)
    assert [a["cdc"]["dataChange"] for a in merge if "cdc" in a] == [False]
    assert {"appId": "q", "version": 0} == {k: v for a in merge if "txn" in a for k, v in a["txn"].items()
                                            if k in ("appId", "version")}


def test_a_merge_that_changes_no_row_rewrites_nothing(merged: str) -> None:
    rewrite = _actions(merged, 2)
    assert not [a for a in rewrite if "add" in a or "remove" in a or "cdc" in a]
    assert _load_cdf(merged, starting_version=2) == []


def test_a_replayed_merge_records_nothing_again(spark: SparkSession, store: DeltaTableStore, merged: str) -> None:
    result = store.merge(spark.createDataFrame([(2, "BOB"), (4, "dan")], SCHEMA), merged, keys=["id"],
                         transaction=AppTransaction("q", 0))

    assert result.skipped and DeltaTable(merged).version() == 2


def test_the_stream_source_reads_the_feed_as_delta_rs_does(
    spark: SparkSession, store: DeltaTableStore, merged: str, tmp_path: Path
) -> None:
    target, checkpoint = str(tmp_path / "changes"), str(tmp_path / "checkpoint")
    run = run_stream(
        lambda: store.read_stream(spark, merged, StreamOptions(starting_version=0, read_change_feed=True)),
        DeltaSink(store, target), checkpoint_location=checkpoint)

    rows = store.read(spark, target).collect()
    assert run.batches == 1
    assert sorted((r._commit_version, r._change_type, r.id, r.name) for r in rows) == _load_cdf(merged)
    # Delta's feed dates a change by its commit file's modification time.
    committed_at = {v: int(Path(f"{merged}/_delta_log/{v:020d}.json").stat().st_mtime * 1000) for v in range(3)}
    assert all(int(r._commit_timestamp.timestamp() * 1000) == committed_at[r._commit_version] for r in rows)


def test_a_table_without_a_feed_is_refused_by_name(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    path = str(tmp_path / "plain")
    store.write(spark.createDataFrame([(1, "ann")], SCHEMA), path)

    with pytest.raises(LakehouseError, match=rf"{path} keeps no change data feed.*{CHANGE_DATA_FEED}"):
        store.read_stream(spark, path, StreamOptions(read_change_feed=True))
