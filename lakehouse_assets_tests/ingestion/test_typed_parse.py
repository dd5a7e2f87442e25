"""The typed JSON parse (``shape_json_records``) shapes records exactly as the rescue path
(``shape_records`` over ``parse_json_documents``) does: the same columns, the same ``_rescued_data``,
for records that fit and for every kind that does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from lakehouse_assets.ingestion.options import AutoLoaderOptions
from lakehouse_assets.ingestion.records import json_documents, parse_json_documents, text_lines
from lakehouse_assets.ingestion.rescue import shape_json_records, shape_records

PLAIN = T.StructType([
    T.StructField("device_id", T.LongType()),
    T.StructField("mrn", T.IntegerType()),
    T.StructField("time", T.DoubleType()),
    T.StructField("heartrate", T.FloatType()),
    T.StructField("name", T.StringType()),
    T.StructField("ok", T.BooleanType()),
])
# A timestamp column parses differently in the two paths: such a schema takes the rescue path.
WITH_TIMESTAMP = T.StructType([*PLAIN.fields, T.StructField("at", T.TimestampType())])

RECORDS = [
    '{"device_id": 1, "mrn": 2, "time": 1.5, "heartrate": 72.25, "name": "Ann", "ok": true}',
    '{"name": "only a name"}',
    "{}",
    '{"device_id": null, "mrn": null, "time": null, "heartrate": null, "name": null, "ok": null}',
    '{"device_id": "17", "mrn": 3}',  # a number as a string
    '{"time": "1.5"}',
    '{"heartrate": "NaN", "time": "Infinity"}',
    '{"heartrate": "n/a"}',
    '{"ok": "true"}',
    '{"ok": 1}',
    '{"mrn": 2147483648}',  # overflows an int
    '{"device_id": 9223372036854775808}',  # overflows a long
    '{"device_id": 1.0}',
    '{"device_id": 1e3}',
    '{"time": 1e400, "heartrate": 1e39}',
    '{"time": 12345678901234567890123}',
    '{"time": -0.0, "heartrate": 3.4028235e38}',
    '{"name": 12}',  # a number in a string column: its text
    '{"name": {"first": "A", "last": "B"}}',  # an object in a string column: its JSON text
    '{"name": [1, 2, 3]}',
    '{"name": "caf\\u00e9 \\"quoted\\" \\n newline"}',
    '{"device_id": [1]}',
    '{"device_id": {"a": 1}}',
    '{"extra": 1, "mrn": 5}',  # an unknown key
    '{"MRN": 5}',  # a case variant of a column
    '{"_rescued_data": "x", "mrn": 5}',  # a metadata column's name
    '{"mrn": 5, "mrn": 6}',  # a repeated key
    '{"mrn": 5',  # malformed
    "not json at all",
    "[1, 2]",
    "42",
    '"a string"',
    "null",
    '[{"mrn": 1}, {"mrn": 2, "extra": true}]',  # an array of objects: one record each
    '{"device_id": 1} trailing',
    '  {"device_id": 2}  ',
]


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("typed_parse")
    (folder / "records.json").write_text("\n".join(RECORDS) + "\n", encoding="utf-8")
    return folder


def _both(spark: SparkSession, folder: Path, schema: T.StructType, mode: str) -> tuple[DataFrame, DataFrame]:
    options = AutoLoaderOptions(format="json", schema_evolution_mode=mode)
    lines = text_lines(spark.read.format("text").load(str(folder)), options)
    rescue_path = shape_records(parse_json_documents(json_documents(lines, options), options), schema, mode=mode, schema_location="loc")
    typed_path = shape_json_records(json_documents(lines, options), schema, mode=mode, schema_location="loc",
                                    options=options)
    columns = [c for c in rescue_path.columns if c != "_ingested_at"]
    return rescue_path.select(columns), typed_path.select(columns)


@pytest.mark.parametrize("mode", ["rescue", "none"])
@pytest.mark.parametrize("schema", [PLAIN, WITH_TIMESTAMP], ids=["plain_types", "with_timestamp"])
def test_typed_parse_shapes_every_record_as_the_rescue_path_does(
    spark: SparkSession, landed: Path, schema: T.StructType, mode: str
) -> None:
    expected, actual = _both(spark, landed, schema, mode)
    expected_rows = sorted(map(repr, expected.collect()))
    actual_rows = sorted(map(repr, actual.collect()))
    assert len(expected_rows) == len(RECORDS) + 1  # the array of two objects is two records
    assert actual_rows == expected_rows


def test_records_that_fit_have_nothing_rescued_and_the_others_do(spark: SparkSession, landed: Path) -> None:
    _, actual = _both(spark, landed, PLAIN, "rescue")
    rows = actual.collect()
    rescued = {r["_rescued_data"] is not None for r in rows if r["name"] == "Ann"}
    assert rescued == {False}
    assert sum(r["_rescued_data"] is not None for r in rows) > len(RECORDS) // 2


def test_a_new_column_stops_the_typed_parse_as_it_stops_the_rescue_path(spark: SparkSession, landed: Path) -> None:
    from lakehouse_assets.ingestion.rescue import parse_marker

    markers = []
    for shaped in _both(spark, landed, PLAIN, "addNewColumns"):
        with pytest.raises(Exception) as raised:
            shaped.collect()
        markers.append(parse_marker(str(raised.value)))
    assert markers[0] is not None and markers[0].columns == ("extra",)
    assert markers[1] == markers[0]


def test_a_marker_spelled_in_the_failed_querys_plan_is_passed_over_for_the_raised_one() -> None:
    """A streaming query's failure prints its plan, where the marker is a literal inside the
    expression that builds the payload, before the error it raised."""
    from lakehouse_assets.ingestion.rescue import NEW_COLUMNS_MARKER, parse_marker

    text = (f"[STREAM_FAILED] ... +- ~Project [raise_error(concat({NEW_COLUMNS_MARKER}, to_json(named_struct(...)))]\n"
            f"Caused by: [USER_RAISED_EXCEPTION] {NEW_COLUMNS_MARKER}"
            '{"columns":["spo2"],"file":"file:/l/new.json","schemaLocation":"/s"}')
    marked = parse_marker(text)
    assert marked is not None and (marked.columns, marked.file, marked.schema_location) == (("spo2",), "file:/l/new.json", "/s")
    assert parse_marker(text.split("Caused by")[0]) is None
