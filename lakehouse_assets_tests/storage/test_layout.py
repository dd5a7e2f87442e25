"""A table's declared layout: created partitioned or clustered by every kind of write, given a
changed clustering or missing properties later, and refused a partitioning it does not have."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.storage import DeltaSink, DeltaTableStore, TableLayout
from lakehouse_assets.storage.sink import DeltaStreamSink

ROWS = [(1, "north", "a"), (2, "south", "b"), (3, "north", "c")]
SCHEMA = "id long, region string, v string"


def _detail(spark: SparkSession, path: str) -> tuple[list[str], list[str], dict[str, str]]:
    row = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert row is not None
    return list(row["partitionColumns"]), list(row["clusteringColumns"]), dict(row["properties"])


def test_a_batch_write_creates_the_table_partitioned_with_its_properties(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    layout = TableLayout({"delta.enableChangeDataFeed": "true"}, partitioned_by=("region",))
    store.write(spark.createDataFrame(ROWS, SCHEMA), path, layout=layout)
    store.write(spark.createDataFrame([(4, "south", "d")], SCHEMA), path, layout=layout)

    partitioned, clustered, properties = _detail(spark, path)
    assert (partitioned, clustered) == (["region"], [])
    assert properties["delta.enableChangeDataFeed"] == "true"
    assert sorted(p.name for p in Path(path).iterdir() if p.is_dir()) == ["_delta_log", "region=north",
                                                                          "region=south"]
    # Other readers see a standard partitioned table.
    assert DeltaTable(path).metadata().partition_columns == ["region"]
    assert DeltaTable(path).to_pyarrow_table().num_rows == 4


def test_a_clustered_table_is_created_clustered_by_a_merge_and_by_both_stream_sinks(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    layout = TableLayout(clustered_by=("region", "id"))
    merged = str(tmp_path / "merged")
    store.merge(spark.createDataFrame(ROWS, SCHEMA), merged, keys=["id"], layout=layout)
    store.merge(spark.createDataFrame([(1, "north", "z")], SCHEMA), merged, keys=["id"], layout=layout)
    assert _detail(spark, merged)[:2] == ([], ["region", "id"])
    assert sorted(r["v"] for r in store.read(spark, merged).collect()) == ["b", "c", "z"]

    streamed = str(tmp_path / "streamed")
    source = spark.readStream.format("delta").load(merged)
    sink = DeltaStreamSink(store, streamed, layout=layout)
    query = sink.stream_writer(source).option("checkpointLocation", str(tmp_path / "ckpt")) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    assert _detail(spark, streamed)[:2] == ([], ["region", "id"])
    assert DeltaTable(streamed).to_pyarrow_table().num_rows == 3

    batches, checkpoint = str(tmp_path / "batches"), str(tmp_path / "ckpt2")
    spark.readStream.format("delta").load(merged).writeStream \
        .foreachBatch(DeltaSink(store, batches, layout=layout)) \
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start().awaitTermination()
    assert _detail(spark, batches)[:2] == ([], ["region", "id"])
    assert DeltaTable(batches).to_pyarrow_table().num_rows == 3


def test_a_changed_clustering_or_a_new_property_is_given_to_the_table_as_it_is_written(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    store.write(spark.createDataFrame(ROWS, SCHEMA), path, layout=TableLayout(clustered_by=("region",)))
    store.write(spark.createDataFrame([(4, "south", "d")], SCHEMA), path,
                layout=TableLayout({"delta.appendOnly": "true"}, clustered_by=("v",)))
    assert _detail(spark, path)[1:] == (["v"], {"delta.appendOnly": "true"})

    store.write(spark.createDataFrame([(5, "south", "e")], SCHEMA), path, layout=TableLayout())
    assert _detail(spark, path)[1] == []
    assert DeltaTable(path).to_pyarrow_table().num_rows == 5


@pytest.mark.parametrize("layout", [TableLayout(partitioned_by=("region",)), TableLayout(clustered_by=("region",))],
                         ids=["partitioned", "clustered"])
def test_an_overwrite_replacing_the_schema_keeps_the_layout(spark: SparkSession, store: DeltaTableStore,
                                                            tmp_path: Path, layout: TableLayout) -> None:
    path = str(tmp_path / "t")
    for rows in (ROWS, [(4, "south", "d")]):
        store.write(spark.createDataFrame(rows, SCHEMA), path, mode="overwrite", overwrite_schema=True,
                    layout=layout)
        assert _detail(spark, path)[:2] == (list(layout.partitioned_by), list(layout.clustered_by))
    assert DeltaTable(path).to_pyarrow_table().to_pylist() == [{"id": 4, "region": "south", "v": "d"}]


def test_a_partitioning_the_table_does_not_have_stops_the_write_naming_table_and_way_out(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    store.write(spark.createDataFrame(ROWS, SCHEMA), path)
    with pytest.raises(LakehouseError) as raised:
        store.write(spark.createDataFrame([(4, "south", "d")], SCHEMA), path,
                    layout=TableLayout(partitioned_by=("region",)))
    message = str(raised.value)
    assert path in message and "partitioned by []" in message and "['region']" in message
    assert "full refresh" in message
    assert DeltaTable(path).version() == 0


def test_a_table_cannot_be_both_partitioned_and_clustered() -> None:
    with pytest.raises(LakehouseError, match="one or the other"):
        TableLayout(partitioned_by=("a",), clustered_by=("b",))
