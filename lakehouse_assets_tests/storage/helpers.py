"""Data and comparisons shared by the storage tests."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import types as T

from lakehouse_assets.spark_conf import is_connect_session

# The local property Spark's stream thread sets to its query's id (StreamExecution.QUERY_ID_KEY).
QUERY_ID_PROPERTY = "sql.streaming.queryId"

UTC = dt.UTC

# One column of every type the lakehouse stores, top-level and nested.
ALL_TYPES_SCHEMA = T.StructType(
    [
        T.StructField("i", T.IntegerType()),
        T.StructField("l", T.LongType()),
        T.StructField("d", T.DoubleType()),
        T.StructField("s", T.StringType()),
        T.StructField("b", T.BooleanType()),
        T.StructField("dt", T.DateType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("dec", T.DecimalType(12, 3)),
        T.StructField("arr", T.ArrayType(T.IntegerType())),
        T.StructField(
            "st",
            T.StructType(
                [
                    T.StructField("name", T.StringType()),
                    T.StructField("n", T.LongType()),
                    T.StructField("tags", T.ArrayType(T.StringType())),
                ]
            ),
        ),
    ]
)

ALL_TYPES_ROWS: list[tuple[Any, ...]] = [
    (
        1, 2**40, 1.5, "alpha", True, dt.date(2024, 1, 31),
        dt.datetime(2024, 1, 31, 23, 59, 58, 123456, tzinfo=UTC), Decimal("12345.678"),
        [1, None, 3], ("x", 5, ["a", "b"]),
    ),
    (
        -7, -(2**62), -0.25, "béta ✓", False, dt.date(1970, 1, 1),
        dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC), Decimal("-0.001"),
        [], (None, None, None),
    ),
    (3, None, None, None, None, None, None, None, None, None),
]


def collected(df: DataFrame) -> list[dict[str, Any]]:
    """The DataFrame's rows as plain dicts (nested rows too), in a stable order."""
    return sort_rows([row.asDict(recursive=True) for row in df.collect()])


def expected(rows: list[tuple[Any, ...]], schema: T.StructType) -> list[dict[str, Any]]:
    """Input tuples as Spark collects them back: timestamps as naive UTC datetimes (the session
    time zone is UTC), structs as dicts."""
    return sort_rows([_as_collected(dict(zip(schema.names, row, strict=True)), schema) for row in rows])


def normalize_arrow(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows from ``pyarrow.Table.to_pylist()`` in the form :func:`collected` gives."""
    return sort_rows([_naive_utc(row) for row in rows])


def sort_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows ordered by their values, first column first (None before any value)."""
    return sorted(rows, key=lambda r: json.dumps(list(r.values()), default=str))


def fields(schema: T.StructType) -> list[tuple[str, str]]:
    """Column names and types, ignoring nullability (tables store every column nullable)."""
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


@contextmanager
def as_query(spark: SparkSession, query_id: str | None = None) -> Iterator[str]:
    """Within the block, this thread's Spark jobs run as a streaming query's batch does: Spark's
    stream thread sets the query's id as a local property (``sql.streaming.queryId``), where a
    ``foreachBatch`` sink asks for it. For a test calling a sink with batches of its own."""
    if is_connect_session(spark):
        pytest.skip("a sink called outside a query: a Spark Connect session has no local properties")
    query_id = query_id or str(uuid.uuid4())
    context = spark.sparkContext
    context.setLocalProperty(QUERY_ID_PROPERTY, query_id)
    try:
        yield query_id
    finally:
        context.setLocalProperty(QUERY_ID_PROPERTY, None)  # type: ignore[arg-type]


def _as_collected(value: Any, dtype: T.DataType) -> Any:
    if value is None:
        return None
    if isinstance(dtype, T.StructType):
        items = value.items() if isinstance(value, dict) else zip(dtype.names, value, strict=True)
        types = {f.name: f.dataType for f in dtype.fields}
        return {k: _as_collected(v, types[k]) for k, v in items}
    if isinstance(dtype, T.ArrayType):
        return [_as_collected(v, dtype.elementType) for v in value]
    if isinstance(dtype, T.TimestampType):
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def _naive_utc(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _naive_utc(v) for k, v in value.items()}
    if isinstance(value, Row):
        return _naive_utc(value.asDict(recursive=True))
    if isinstance(value, list):
        return [_naive_utc(v) for v in value]
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def drop_commit(commit: Path) -> None:
    """Delete one commit file of a Delta log, as if it had never been made, with what was
    written beside it: Delta's version checksum (``N.crc``) and Hadoop's checksums of both
    (``.N.json.crc``, ``.N.crc.crc``), which would no longer match a commit made again."""
    checksum = commit.with_suffix(".crc")
    for path in (commit, checksum, commit.with_name(f".{commit.name}.crc"), checksum.with_name(f".{checksum.name}.crc")):
        path.unlink(missing_ok=True)
