"""AUTO CDC tables keeping a change data feed: deletes, updates and SCD type 2 versions closed
are recorded as Delta's change rows, read by delta-rs and by the project's stream source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.cdc import AutoCdc
from lakehouse_assets.cdc.sink import AutoCdcTable
from lakehouse_assets.storage import AppTransaction, DeltaSink, DeltaTableStore, StreamOptions, TableLayout
from lakehouse_assets.storage.delta import CHANGE_DATA_FEED
from lakehouse_assets.streaming import run_stream

SCHEMA = "id long, name string"
FEED = {CHANGE_DATA_FEED: "true"}
Change = tuple[Any, ...]


def test_a_new_feed_query_starts_from_the_table_as_inserts_then_follows_changes(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    source, target, checkpoint = (str(tmp_path / n) for n in ("people", "changes", "checkpoint"))
    store.write(spark.createDataFrame([(1, "ann"), (2, "bob")], SCHEMA), source, layout=TableLayout(FEED))
    store.merge(spark.createDataFrame([(1, "ANN")], SCHEMA), source, keys=["id"])

    def stream() -> None:
        run_stream(lambda: store.read_stream(spark, source, StreamOptions(read_change_feed=True)),
                   DeltaSink(store, target), checkpoint_location=checkpoint)

    def read() -> list[Change]:
        return sorted((r._commit_version, r._change_type, r.id, r.name) for r in store.read(spark, target).collect())

    stream()
    assert read() == [(1, "insert", 1, "ANN"), (1, "insert", 2, "bob")]

    # A delete (the AUTO CDC sink's, below) and an update, read once each across restarts.
    AutoCdcTable(store, source, AutoCdc(keys=["id"], sequence_by="seq", apply_as_deletes="op = 'DELETE'",
                                        except_column_list=["op", "seq"])).apply(
        spark.createDataFrame([(2, None, "DELETE", 5), (1, "Ann", "UPSERT", 6)], "id long, name string, op string, "
                              "seq long"), AppTransaction("cdc", 0), {})
    stream()
    assert read() == [(1, "insert", 1, "ANN"), (1, "insert", 2, "bob"), (2, "delete", 2, "bob"),
                      (2, "update_postimage", 1, "Ann"), (2, "update_preimage", 1, "ANN")]


def test_scd_type_2_history_closes_a_version_as_an_update(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    path = str(tmp_path / "history")
    table = AutoCdcTable(store, path, AutoCdc(keys=["id"], sequence_by="seq", stored_as_scd_type=2,
                                              except_column_list=["seq"]), TableLayout(FEED))
    changes = "id long, name string, seq long"
    table.apply(spark.createDataFrame([(1, "ann", 1), (2, "bob", 1)], changes), AppTransaction("cdc", 0), {})
    table.apply(spark.createDataFrame([(1, "Ann", 5)], changes), AppTransaction("cdc", 1), {})

    feed = pa.table(DeltaTable(path).load_cdf(starting_version=1).read_all()).to_pylist()
    assert sorted((r["_change_type"], r["name"], r["__START_AT"], r["__END_AT"]) for r in feed) == [
        ("insert", "Ann", 5, None), ("update_postimage", "ann", 1, 5), ("update_preimage", "ann", 1, None)]
