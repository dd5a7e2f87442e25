"""Every kind of table this storage layer writes is a standard Delta table: delta-rs alone (no
Spark, no code of this project) reads the same rows and schema as Spark reads through the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.storage import AppTransaction, DeltaSink, DeltaTableStore

from .helpers import ALL_TYPES_ROWS, ALL_TYPES_SCHEMA, as_query, collected, normalize_arrow

#: The id of the streaming query whose batches wrote the table ``streamed``.
STREAMING_QUERY = "8a7e6e0c-5b0f-4a55-9d3c-2f9f0a1c7e31"


@pytest.fixture(scope="module")
def tables(spark: SparkSession, store: DeltaTableStore, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One table per way of writing, written once for this module's tests."""
    root = tmp_path_factory.mktemp("standard")
    paths = {name: str(root / name) for name in
             ["all_types", "appended", "overwritten", "merged", "schema_grown", "streamed", "empty"]}
    types = spark.createDataFrame(ALL_TYPES_ROWS, ALL_TYPES_SCHEMA)

    store.write(types, paths["all_types"])

    store.write(spark.range(0, 5), paths["appended"])
    store.write(spark.range(5, 8), paths["appended"], transaction=AppTransaction("app", 3))

    store.write(spark.createDataFrame([(1, "a")], "id int, v string"), paths["overwritten"])
    store.write(spark.createDataFrame([(2.5,)], "x double"), paths["overwritten"], mode="overwrite",
                overwrite_schema=True)

    store.write(types, paths["merged"])
    store.merge(spark.createDataFrame([(1, *ALL_TYPES_ROWS[1][1:]), (42, *ALL_TYPES_ROWS[0][1:])],
                                      ALL_TYPES_SCHEMA), paths["merged"], keys=["i"])

    store.write(spark.createDataFrame([(1, "a")], "id long, v string"), paths["schema_grown"])
    store.write(spark.createDataFrame([(2, "b", [1.5])], "id long, v string, w array<double>"),
                paths["schema_grown"], merge_schema=True)

    sink = DeltaSink(store, paths["streamed"], output_mode="update", keys=["k"])
    with as_query(spark, STREAMING_QUERY):
        sink(spark.createDataFrame([("a", 1), ("b", 2)], "k string, n long"), 0)
        sink(spark.createDataFrame([("b", 3)], "k string, n long"), 1)

    store.write(spark.createDataFrame([], "id long, at timestamp"), paths["empty"])
    return paths


NAMES = ["all_types", "appended", "overwritten", "merged", "schema_grown", "streamed", "empty"]


def _without_nullability(schema: Any) -> Any:
    """A Delta/Spark schema JSON without nullability and field metadata, which Spark reports
    differently from the log (a batch read marks every column nullable)."""
    if isinstance(schema, dict):
        return {k: _without_nullability(v) for k, v in schema.items()
                if k not in ("nullable", "containsNull", "valueContainsNull", "metadata")}
    if isinstance(schema, list):
        return [_without_nullability(v) for v in schema]
    return schema


@pytest.mark.parametrize("name", NAMES)
def test_delta_rs_alone_reads_what_spark_reads(
    spark: SparkSession, store: DeltaTableStore, tables: dict[str, str], name: str
) -> None:
    path = tables[name]
    table = DeltaTable(path)
    by_spark = store.read(spark, path)

    assert _without_nullability(json.loads(table.schema().to_json())) == _without_nullability(by_spark.schema.jsonValue())
    assert normalize_arrow(table.to_pyarrow_table().to_pylist()) == collected(by_spark)


@pytest.mark.parametrize("name", NAMES)
def test_log_follows_the_protocol(tables: dict[str, str], name: str) -> None:
    table_dir = Path(tables[name])
    table = DeltaTable(str(table_dir))
    protocol = table.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)

    versions = sorted(int(p.stem) for p in (table_dir / "_delta_log").glob("*.json"))
    assert versions == list(range(table.version() + 1))
    for version in versions:
        actions = [json.loads(line) for line in
                   (table_dir / "_delta_log" / f"{version:020d}.json").read_text().splitlines() if line.strip()]
        assert sum("commitInfo" in a for a in actions) == 1
        for add in (a["add"] for a in actions if "add" in a):
            assert {"path", "size", "modificationTime", "dataChange", "partitionValues"} <= set(add)
            assert not add["path"].startswith("/") and (table_dir / add["path"]).is_file()

    # Every live file is in the table folder; beside them only Hadoop's checksums of data
    # files (.part-*.crc, which other readers skip as hidden), no _SUCCESS or _temporary.
    live = {Path(uri.removeprefix("file://")) for uri in table.file_uris()}
    assert all(table_dir in p.parents and p.is_file() for p in live)
    leftovers = [p for p in table_dir.rglob("*") if p.is_file() and "_delta_log" not in p.parts
                 and (p.name.startswith("_") or (p.name.endswith(".crc") and not p.name.startswith(".part-")))]
    assert leftovers == []


def test_time_travel_agrees(spark: SparkSession, store: DeltaTableStore, tables: dict[str, str]) -> None:
    for name in ("overwritten", "merged", "schema_grown"):
        path = tables[name]
        old = DeltaTable(path, version=0)
        assert normalize_arrow(old.to_pyarrow_table().to_pylist()) == collected(store.read(spark, path, version=0))


def test_app_transactions_are_standard_txn_actions(tables: dict[str, str]) -> None:
    assert DeltaTable(tables["appended"]).transaction_version("app") == 3
    assert DeltaTable(tables["streamed"]).transaction_version(STREAMING_QUERY) == 1
