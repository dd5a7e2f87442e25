"""Batch reads: the latest version, time travel, and errors that say what is missing."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.errors import LakehouseError, TableNotFoundError
from lakehouse_assets.storage import DeltaTableStore

from .helpers import collected


@pytest.fixture(scope="module")
def three_versions(spark: SparkSession, store: DeltaTableStore, tmp_path_factory: pytest.TempPathFactory) -> str:
    """v0: ids 0-2; v1: id 3 appended; v2: overwritten with id 9. Tests only read it."""
    path = str(tmp_path_factory.mktemp("read") / "t")
    store.write(spark.createDataFrame([(0, "a"), (1, "b"), (2, "c")], "id long, v string"), path)
    store.write(spark.createDataFrame([(3, "d")], "id long, v string"), path)
    store.write(spark.createDataFrame([(9, "z")], "id long, v string"), path, mode="overwrite")
    return path


def test_time_travel_reads_each_version(spark: SparkSession, store: DeltaTableStore, three_versions: str) -> None:
    def ids(version: int | None) -> list[int]:
        return [r["id"] for r in collected(store.read(spark, three_versions, version=version))]

    assert ids(0) == [0, 1, 2]
    assert ids(1) == [0, 1, 2, 3]
    assert ids(2) == [9]
    assert ids(None) == [9]
    assert store.version(three_versions) == 2


@pytest.mark.parametrize("version", [3, 1000, -1])
def test_reading_a_version_that_does_not_exist_names_it(
    spark: SparkSession, store: DeltaTableStore, three_versions: str, version: int
) -> None:
    with pytest.raises(LakehouseError) as caught:
        store.read(spark, three_versions, version=version)
    message = str(caught.value)
    assert three_versions in message
    assert f"no version {version}" in message and "from 0 to 2" in message


def test_reading_a_missing_table_names_the_path(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "never_written")

    for read in (
        lambda: store.read(spark, path),
        lambda: store.read(spark, path, version=0),
        lambda: store.read_stream(spark, path),
        lambda: store.schema(path),
        lambda: store.history(path),
    ):
        with pytest.raises(TableNotFoundError) as caught:
            read()
        assert caught.value.path == path and path in str(caught.value)
    assert not store.exists(path)
    assert store.version(path) is None


def test_reading_a_folder_without_a_delta_log_is_table_not_found(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    folder = tmp_path / "plain_parquet"
    spark.range(3).write.parquet(str(folder))
    with pytest.raises(TableNotFoundError, match=str(folder)):
        store.read(spark, str(folder))


def test_read_is_lazy_and_composes_with_spark(spark: SparkSession, store: DeltaTableStore, three_versions: str) -> None:
    df = store.read(spark, three_versions, version=1).where("id >= 2").selectExpr("id * 10 AS x")
    assert sorted(r.x for r in df.collect()) == [20, 30]


def test_tables_with_column_mapping_written_by_another_engine_are_read_and_written(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    # Another engine's table whose Parquet columns have physical names, not the logical ones:
    # Delta's connector maps them, in reads, streams, appends and merges.
    path = str(tmp_path / "mapped")
    write_deltalake(path, pa.table({"id": [1, 2]}), configuration={"delta.columnMapping.mode": "name"})

    assert sorted(r.id for r in store.read(spark, path).collect()) == [1, 2]
    store.write(spark.range(5, 6), path)
    store.merge(spark.range(1, 2).withColumn("id", F.col("id") + 9), path, keys=["id"])
    assert sorted(r.id for r in store.read(spark, path).collect()) == [1, 2, 5, 10]
