"""Spark SQL type names read without a session, held to Spark's own reading of them
(``DataType.fromDDL``, which asks the JVM or a Spark Connect server)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse_assets.storage import type_sql
from lakehouse_assets.tables.sql_types import UnknownTypeError, spark_type

NAMES = [
    "BOOLEAN", "tinyint", "byte", "SMALLINT", "short", "INT", "integer", "BIGINT", "long", "FLOAT", "real", "DOUBLE",
    "DECIMAL(10, 2)", "decimal", "dec(5,1)", "numeric(38,18)", "DATE", "TIMESTAMP", "timestamp_ltz", "TIMESTAMP_NTZ",
    "STRING", "BINARY", "ARRAY<STRING>", "map<string, bigint>", "STRUCT<a: INT, `b c`: ARRAY<DECIMAL(5,2)>>",
]


@pytest.mark.parametrize("name", NAMES)
def test_a_type_name_is_the_type_spark_reads_it_as(spark: SparkSession, name: str) -> None:
    parsed = spark_type(name)
    assert parsed == T.DataType.fromDDL(name)
    # Written back as Spark SQL, it reads as itself (how declared types are kept in metadata).
    assert spark_type(type_sql(parsed)) == parsed


@pytest.mark.parametrize("name", ["dubble", "bigint not null", "int comment 'x'", "array<int", "", "int, b int"])
def test_a_name_that_is_not_a_spark_sql_type_is_refused(name: str) -> None:
    with pytest.raises(UnknownTypeError, match="is not a Spark SQL type"):
        spark_type(name)


@pytest.mark.parametrize("name", ["CHAR(3)", "VARCHAR(10)", "STRING COLLATE UTF8_LCASE", "INTERVAL DAY", "JSON"])
def test_a_type_a_declaration_cannot_hold_to_is_refused(name: str) -> None:
    with pytest.raises(UnknownTypeError, match="cannot hold to"):
        spark_type(name)
