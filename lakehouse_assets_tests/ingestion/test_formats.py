"""Formats beyond JSON lines: multi-line JSON, CSV with headers, Parquet."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from lakehouse_assets.ingestion import AutoLoaderOptions, SchemaStore
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore

from .helpers import BOM, Bronze, by_source, file_uri, recording, rescued


def test_multi_line_json_documents(spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore) -> None:
    bronze = Bronze(spark, settings, store)
    bronze.land("object.json", json.dumps(recording(1), indent=2))
    bronze.land("array.json", json.dumps([recording(2), recording(3)], indent=2))
    bronze.land("bom.json", BOM + json.dumps(recording(4), indent=2).encode())
    bronze.land("broken.json", '{\n  "device_id": 5,\n  "mrn": \n')
    bronze.land("blank.json", "\n\n")

    bronze.run(AutoLoaderOptions(multi_line=True, infer_column_types=True))

    rows = by_source(bronze.rows())
    assert sum(len(r) for r in rows.values()) == 5
    assert sorted(r["mrn"] for r in rows[file_uri(bronze.landing / "array.json")]) == [recording(2)["mrn"], recording(3)["mrn"]]
    assert rows[file_uri(bronze.landing / "bom.json")][0]["heartrate"] == recording(4)["heartrate"]
    broken = rows[file_uri(bronze.landing / "broken.json")][0]
    assert broken["mrn"] is None and rescued(broken)["_raw"] == '{\n  "device_id": 5,\n  "mrn": \n'


def test_csv_columns_are_matched_by_each_files_header(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    bronze = Bronze(spark, settings, store, name="patients", source_format="csv")
    bronze.land("a.csv", "mrn,name\n1,ann\n2,bob\n")
    options = AutoLoaderOptions(format="csv", header=True, infer_column_types=True, schema_evolution_mode="rescue")
    bronze.run(options)
    # Later files: columns in another order, a line with a value too many, a new column, a BOM.
    bronze.land("b.csv", "name,mrn\ncid,3\ndan,4,extra\n")
    bronze.land("c.csv", BOM + b"mrn,name,ward\r\n5,eve,A\r\n6,,\r\n")
    bronze.run(options)

    rows = {r["mrn"]: r for r in bronze.rows()}
    assert bronze.column_types()["mrn"] == "bigint" and len(rows) == 6
    assert (rows[3]["name"], rows[4]["name"], rows[5]["name"], rows[6]["name"]) == ("cid", "dan", "eve", None)
    assert rescued(rows[4]) == {"_raw": "dan,4,extra", "_file": file_uri(bronze.landing / "b.csv")}
    assert rescued(rows[5]) == {"ward": "A", "_file": file_uri(bronze.landing / "c.csv")}
    assert rescued(rows[6]) == {"ward": None, "_file": file_uri(bronze.landing / "c.csv")}
    assert rescued(rows[1]) is None


def test_parquet_new_columns_are_added_or_rescued(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    evolving = Bronze(spark, settings, store, name="evolving", source_format="parquet")
    rescuing = Bronze(spark, settings, store, name="rescuing", source_format="parquet")
    first = pa.table({"mrn": pa.array([1, 2], pa.int64()), "name": ["ann", "bob"]})
    second = pa.table({"mrn": pa.array([3], pa.int64()), "name": ["cid"], "ward": ["A"]})
    for bronze in (evolving, rescuing):
        bronze.landing.mkdir(parents=True)
        pq.write_table(first, bronze.landing / "1.parquet")

    evolve = AutoLoaderOptions(format="parquet", continue_on_new_columns=True)
    rescue = AutoLoaderOptions(format="parquet", schema_evolution_mode="rescue")
    evolving.run(evolve)
    rescuing.run(rescue)
    for bronze in (evolving, rescuing):
        pq.write_table(second, bronze.landing / "2.parquet")
    evolved_run = evolving.run(evolve)
    rescuing.run(rescue)

    assert evolved_run.restarts == 1
    assert sorted((r["mrn"], r["ward"]) for r in evolving.rows()) == [(1, None), (2, None), (3, "A")]
    assert SchemaStore(evolving.schema_location).versions() == [0, 1]
    rescued_rows = {r["mrn"]: r for r in rescuing.rows()}
    assert "ward" not in rescued_rows[3] and rescued(rescued_rows[3]) == {
        "ward": "A", "_file": file_uri(rescuing.landing / "2.parquet")
    }
    assert rescued(rescued_rows[1]) is None


def test_every_row_keeps_the_line_or_position_it_came_from(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    # JSON lines: a BOM, CRLF line ends, a blank line, an array of two on one line, a bad line.
    lines = BOM + (json.dumps(recording(1)) + "\r\n\r\n" + json.dumps([recording(2), recording(3)]) + "\n"
                   + "{not json\n" + json.dumps(recording(4)) + "\n").encode()
    json_bronze = Bronze(spark, settings, store)
    json_bronze.land("a.json", lines)
    json_bronze.land("b.json", json.dumps(recording(5)))
    json_bronze.run(AutoLoaderOptions(infer_column_types=True, schema_hints="time DOUBLE, heartrate DOUBLE"))
    found = sorted((r["_source_file"].rsplit("/", 1)[-1], r["_source_line"], r["mrn"]) for r in json_bronze.rows())
    assert found == [("a.json", 1, recording(1)["mrn"]), ("a.json", 3, recording(2)["mrn"]),
                     ("a.json", 3, recording(3)["mrn"]), ("a.json", 4, None), ("a.json", 5, recording(4)["mrn"]),
                     ("b.json", 1, recording(5)["mrn"])]

    csv_bronze = Bronze(spark, settings, store, name="patients", source_format="csv")
    csv_bronze.land("p.csv", "mrn,name\n1,ann\n\n2,bob\n")
    csv_bronze.run(AutoLoaderOptions(format="csv", header=True, infer_column_types=True))
    assert sorted((r["mrn"], r["_source_line"]) for r in csv_bronze.rows()) == [(1, 2), (2, 4)]

    parquet_bronze = Bronze(spark, settings, store, name="rows", source_format="parquet")
    parquet_bronze.landing.mkdir(parents=True)
    pq.write_table(pa.table({"mrn": pa.array([7, 8, 9], pa.int64())}), parquet_bronze.landing / "r.parquet")
    parquet_bronze.run(AutoLoaderOptions(format="parquet"))
    assert sorted((r["mrn"], r["_source_line"]) for r in parquet_bronze.rows()) == [(7, 1), (8, 2), (9, 3)]

    multi = Bronze(spark, settings, store, name="documents")
    multi.land("m.json", json.dumps([recording(6), recording(7)], indent=2))
    multi.run(AutoLoaderOptions(multi_line=True, infer_column_types=True))
    assert sorted((r["mrn"], r["_source_line"]) for r in multi.rows()) == [(recording(6)["mrn"], 1),
                                                                           (recording(7)["mrn"], 2)]
