"""The stored schema: inference per format, schema hints, inferColumnTypes, versions, reuse."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse_assets.ingestion import (
    AutoLoaderOptions,
    IngestionOptionsError,
    NothingToInferError,
    SchemaStore,
    StoredSchemaError,
)
from lakehouse_assets.ingestion.schema_store import apply_schema_hints, infer_schema, resolve_schema
from lakehouse_assets.location import ObjectStore

from .helpers import BOM, json_lines, land, recording

LOCAL = ObjectStore()  # the files are on this disk


def _types(schema: T.StructType) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in schema.fields}


@pytest.fixture(scope="module")
def json_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Read-only: recordings, a nested field, a malformed line, a BOM and a field differing by case."""
    folder = tmp_path_factory.mktemp("json_landing")
    land(folder, "1.json", json_lines([recording(1), recording(2, tags={"ward": "A", "bed": 3}), "{oops"]))
    land(folder, "2.json", BOM + json_lines([recording(3, Time=5)]).encode())
    land(folder, "3.json", "")
    return folder


def test_json_columns_are_strings_unless_types_are_inferred(spark: SparkSession, json_folder: Path) -> None:
    as_strings = infer_schema(spark, str(json_folder), AutoLoaderOptions(), store=LOCAL)
    typed = infer_schema(spark, str(json_folder), AutoLoaderOptions(infer_column_types=True), store=LOCAL)

    assert _types(as_strings) == {
        "device_id": "string", "heartrate": "string", "mrn": "string", "tags": "string", "time": "string"
    }
    assert _types(typed) == {
        "device_id": "bigint", "heartrate": "double", "mrn": "bigint",
        "tags": "struct<bed:bigint,ward:string>", "time": "double",
    }


def test_schema_hints_override_and_add_columns(spark: SparkSession, json_folder: Path) -> None:
    inferred = infer_schema(spark, str(json_folder), AutoLoaderOptions(), store=LOCAL)
    hinted = apply_schema_hints(inferred, "time DOUBLE, MRN BIGINT, spo2 DOUBLE")
    assert _types(hinted) == {
        "device_id": "string", "heartrate": "string", "mrn": "bigint", "tags": "string", "time": "double",
        "spo2": "double",
    }
    with pytest.raises(IngestionOptionsError, match="not valid DDL"):
        apply_schema_hints(inferred, "time DOUBLE,, oops")
    with pytest.raises(IngestionOptionsError, match="_rescued_data"):
        apply_schema_hints(inferred, "_rescued_data STRING")


def test_csv_files_are_inferred_by_their_own_headers(spark: SparkSession, tmp_path: Path) -> None:
    land(tmp_path, "a.csv", "mrn,name,score\n1,ann,1.5\n2,bob,2\n")
    land(tmp_path, "b.csv", "name,mrn,admitted,active\ncid,3,2024-01-02 10:00:00,true\n")
    typed = infer_schema(spark, str(tmp_path), AutoLoaderOptions(format="csv", header=True, infer_column_types=True), store=LOCAL)
    strings = infer_schema(spark, str(tmp_path), AutoLoaderOptions(format="csv", header=True), store=LOCAL)
    assert _types(typed) == {"mrn": "bigint", "name": "string", "score": "double", "admitted": "timestamp", "active": "boolean"}
    assert set(_types(strings).values()) == {"string"} and list(_types(strings)) == list(_types(typed))


def test_parquet_keeps_its_own_types(spark: SparkSession, tmp_path: Path) -> None:
    pq.write_table(pa.table({"mrn": pa.array([1], pa.int64()), "name": ["ann"]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"mrn": pa.array([2], pa.int64()), "score": [1.5]}), tmp_path / "b.parquet")
    assert _types(infer_schema(spark, str(tmp_path), AutoLoaderOptions(format="parquet"), store=LOCAL)) == {
        "mrn": "bigint", "name": "string", "score": "double"
    }


def test_first_run_stores_the_schema_and_later_runs_reuse_it(spark: SparkSession, tmp_path: Path) -> None:
    landing, store = tmp_path / "landing", SchemaStore(tmp_path / "schema")
    options = AutoLoaderOptions(infer_column_types=True, schema_hints="time DOUBLE")
    land(landing, "1.json", json_lines([recording(1, time=1)]))

    first = resolve_schema(spark, str(landing), options, store)
    # A later file would infer differently; the stored schema is what later runs read with.
    land(landing, "2.json", json_lines([recording(2, mrn="not-a-number", extra=1)]))
    again = resolve_schema(spark, str(landing), options, store)

    assert first.version == again.version == 0 and again.schema == first.schema
    assert _types(again.schema) == {"device_id": "bigint", "heartrate": "double", "mrn": "bigint", "time": "double"}
    assert (tmp_path / "schema" / "_schemas" / "0").is_file()
    assert again.schema_hints == "time DOUBLE" and again.files == ("file:" + str(landing / "1.json"),)


def test_changed_hints_store_a_new_version_and_other_options_are_refused(spark: SparkSession, tmp_path: Path) -> None:
    landing, store = tmp_path / "landing", SchemaStore(tmp_path / "schema")
    land(landing, "1.json", json_lines([recording(1)]))
    resolve_schema(spark, str(landing), AutoLoaderOptions(), store)

    hinted = resolve_schema(spark, str(landing), AutoLoaderOptions(schema_hints="heartrate DOUBLE"), store)
    assert hinted.version == 1 and _types(hinted.schema)["heartrate"] == "double"
    assert "schema hints changed" in hinted.reason
    with pytest.raises(StoredSchemaError, match="infer_column_types"):
        resolve_schema(spark, str(landing), AutoLoaderOptions(infer_column_types=True, schema_hints="heartrate DOUBLE"), store)


def test_nothing_landed_is_said_plainly(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(NothingToInferError, match="no data files"):
        resolve_schema(spark, str(tmp_path / "empty"), AutoLoaderOptions(), SchemaStore(tmp_path / "schema"))


def test_of_two_writers_of_the_same_version_the_first_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = SchemaStore(tmp_path), SchemaStore(tmp_path)
    a = T.StructType([T.StructField("a", T.StringType())])
    b = T.StructType([T.StructField("b", T.StringType())])
    first.add(a, inferred_with={}, schema_hints=None, reason="first")
    # The second writer looked before the first one wrote: it also means to write version 0.
    monkeypatch.setattr(second, "versions", lambda: [])

    kept = second.add(b, inferred_with={}, schema_hints=None, reason="second")

    assert kept.version == 0 and kept.schema == a and kept.reason == "first"
    assert sorted(p.name for p in (tmp_path / "_schemas").iterdir()) == ["0"]
