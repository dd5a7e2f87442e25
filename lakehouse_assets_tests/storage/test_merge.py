"""Merge (upsert on keys): matched rows are updated, the others inserted, in one commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.errors import LakehouseError, SchemaMismatchError
from lakehouse_assets.storage import AppTransaction, DeltaTableStore

from .helpers import ALL_TYPES_ROWS, ALL_TYPES_SCHEMA, collected, expected, fields, sort_rows

SCHEMA = "id long, name string, score double"


@pytest.fixture
def customers(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> str:
    path = str(tmp_path / "customers")
    store.write(spark.createDataFrame([(1, "ann", 1.0), (2, "bob", 2.0), (3, "cid", 3.0)], SCHEMA), path)
    return path


def test_merge_updates_matches_and_inserts_the_rest(
    spark: SparkSession, store: DeltaTableStore, customers: str
) -> None:
    result = store.merge(spark.createDataFrame([(2, "BOB", 20.0), (4, "dan", 4.0)], SCHEMA), customers, keys=["id"])

    assert result.version == 1 and result.rows_written == 2 and not result.skipped
    assert collected(store.read(spark, customers)) == sort_rows([
        {"id": 1, "name": "ann", "score": 1.0},
        {"id": 2, "name": "BOB", "score": 20.0},
        {"id": 3, "name": "cid", "score": 3.0},
        {"id": 4, "name": "dan", "score": 4.0},
    ])
    # The version before the merge is still there.
    assert [r["name"] for r in collected(store.read(spark, customers, version=0))] == ["ann", "bob", "cid"]


def test_merge_on_composite_keys(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    schema = "region string, day int, total long"
    store.write(spark.createDataFrame([("eu", 1, 10), ("eu", 2, 20), ("us", 1, 30)], schema), path)
    store.merge(spark.createDataFrame([("eu", 2, 99), ("us", 2, 5)], schema), path, keys=["region", "day"])

    assert collected(store.read(spark, path)) == sort_rows([
        {"region": "eu", "day": 1, "total": 10},
        {"region": "eu", "day": 2, "total": 99},
        {"region": "us", "day": 1, "total": 30},
        {"region": "us", "day": 2, "total": 5},
    ])


def test_merge_of_every_type(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "types")
    store.write(spark.createDataFrame(ALL_TYPES_ROWS[:1], ALL_TYPES_SCHEMA), path)
    # Key 1 is updated with the second row's values, key 3 (all nulls) is inserted.
    changed = [(1, *ALL_TYPES_ROWS[1][1:]), ALL_TYPES_ROWS[2]]
    store.merge(spark.createDataFrame(changed, ALL_TYPES_SCHEMA), path, keys=["i"])

    back = store.read(spark, path)
    assert fields(back.schema) == fields(ALL_TYPES_SCHEMA)
    assert collected(back) == expected(changed, ALL_TYPES_SCHEMA)


def test_merge_into_a_missing_table_creates_it(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "new")
    result = store.merge(spark.createDataFrame([(1, "a", 0.5)], SCHEMA), path, keys=["id"])

    assert result.version == 0 and result.rows_written == 1
    assert collected(store.read(spark, path)) == [{"id": 1, "name": "a", "score": 0.5}]
    assert store.history(path)[0].operation == "MERGE"


def test_merge_leaves_columns_the_batch_lacks(spark: SparkSession, store: DeltaTableStore, customers: str) -> None:
    store.merge(spark.createDataFrame([(1, "ANN"), (5, "eve")], "id long, name string"), customers, keys=["id"])

    rows = {r["id"]: r for r in collected(store.read(spark, customers))}
    assert rows[1] == {"id": 1, "name": "ANN", "score": 1.0}
    assert rows[5] == {"id": 5, "name": "eve", "score": None}


def test_merge_widens_a_narrower_key_type(spark: SparkSession, store: DeltaTableStore, customers: str) -> None:
    store.merge(spark.createDataFrame([(3, "CID", 30.0)], "id int, name string, score double"), customers, keys=["id"])

    assert fields(store.schema(customers))[0] == ("id", "bigint")
    assert {r["id"]: r["name"] for r in collected(store.read(spark, customers))} == {1: "ann", 2: "bob", 3: "CID"}


def test_merge_with_a_new_column(spark: SparkSession, store: DeltaTableStore, customers: str) -> None:
    batch = spark.createDataFrame([(2, "bob", 2.0, "gold")], SCHEMA + ", tier string")
    with pytest.raises(SchemaMismatchError, match="'tier'"):
        store.merge(batch, customers, keys=["id"])
    assert store.version(customers) == 0

    store.merge(batch, customers, keys=["id"], merge_schema=True)
    assert fields(store.schema(customers))[-1] == ("tier", "string")
    assert {r["id"]: r["tier"] for r in collected(store.read(spark, customers))} == {1: None, 2: "gold", 3: None}


def test_replayed_merge_batch_is_skipped(spark: SparkSession, store: DeltaTableStore, customers: str) -> None:
    batch = spark.createDataFrame([(2, "twice?", 0.0)], SCHEMA)
    first = store.merge(batch, customers, keys=["id"], transaction=AppTransaction("q", 4))
    again = store.merge(batch, customers, keys=["id"], transaction=AppTransaction("q", 4))

    assert first.version == 1 and again.skipped and again.version is None
    assert store.version(customers) == 1
    assert store.committed_batch(customers, "q") == 4


def test_merge_needs_keys_that_the_data_has(spark: SparkSession, store: DeltaTableStore, customers: str) -> None:
    batch = spark.createDataFrame([(2, "x", 0.0)], SCHEMA)
    with pytest.raises(LakehouseError, match="needs at least one key"):
        store.merge(batch, customers, keys=[])
    with pytest.raises(LakehouseError) as caught:
        store.merge(batch, customers, keys=["customer_id"])
    assert customers in str(caught.value) and "customer_id" in str(caught.value)
    assert store.version(customers) == 0


def test_merge_matches_null_keys(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    # A group whose key is null (an aggregate's) is one row, updated in place, not inserted again.
    path = str(tmp_path / "t")
    schema = "region string, total long"
    store.write(spark.createDataFrame([(None, 1), ("eu", 2)], schema), path)
    store.merge(spark.createDataFrame([(None, 5)], schema), path, keys=["region"])
    assert collected(store.read(spark, path)) == sort_rows([{"region": None, "total": 5}, {"region": "eu", "total": 2}])


def test_merge_rewrites_only_the_files_holding_its_keys(spark: SparkSession, store: DeltaTableStore,
                                                        tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for region in ("eu", "us", "asia"):
        store.write(spark.createDataFrame([(region, 1)], "region string, total long").coalesce(1), path, mode="append")
    before = {f.relative_path for f in store.snapshot(path).files()}
    store.merge(spark.createDataFrame([("us", 7)], "region string, total long"), path, keys=["region"])
    after = {f.relative_path for f in store.snapshot(path).files()}
    assert len(before - after) == 1 and len(after - before) == 1, "one file replaced, the other two untouched"
    assert store.history(path)[0].rows_written == 1


def test_a_merge_replacing_groups_deletes_their_rows_the_batch_lacks(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    # An SCD type 2 table: a key's versions, identified by key and start; a batch replaces a
    # key's versions whole.
    path = str(tmp_path / "versions")
    schema = "mrn string, start long, name string"
    store.write(spark.createDataFrame([("a", 1, "ann"), ("a", 5, "anne"), ("b", 1, "bob"), (None, 1, "nil")],
                                      schema), path)
    batch = spark.createDataFrame([("a", 1, "ann"), ("a", 3, "ana"), (None, 2, "null")], schema)
    groups = spark.createDataFrame([("a",), (None,), ("z",)], "mrn string")

    result = store.merge(batch, path, keys=["mrn", "start"], replacing=groups, operation="AUTO CDC")

    assert collected(store.read(spark, path)) == sort_rows([
        {"mrn": "a", "start": 1, "name": "ann"},
        {"mrn": "a", "start": 3, "name": "ana"},
        {"mrn": "b", "start": 1, "name": "bob"},  # not a group of the batch: kept
        {"mrn": None, "start": 2, "name": "null"},  # null keys are a group like any other
    ])
    metrics = store.history(path, limit=1)[0]
    assert metrics.operation == "AUTO CDC" and result.version == 1
    # ann was held as she is: neither updated nor rewritten as a change.
    assert metrics.metrics["numTargetRowsDeleted"] == "2" and metrics.metrics["numTargetRowsUpdated"] == "0"
