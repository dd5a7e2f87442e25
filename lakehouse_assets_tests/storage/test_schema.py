"""Schema rules of writes: new columns only when asked, safe widening, clear errors otherwise."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse_assets.errors import SchemaMismatchError
from lakehouse_assets.storage import DeltaTableStore, TableLayout
from lakehouse_assets.storage._schema import fits, plan_write

from .helpers import collected, fields, sort_rows


@pytest.fixture
def people(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> str:
    path = str(tmp_path / "people")
    store.write(spark.createDataFrame([(1, "ann"), (2, "bob")], "id long, name string"), path)
    return path


def test_merge_schema_adds_columns(spark: SparkSession, store: DeltaTableStore, people: str) -> None:
    batch = spark.createDataFrame([(3, "cid", 41, ["x"])], "id long, name string, age int, tags array<string>")
    store.write(batch, people, merge_schema=True)

    assert fields(store.schema(people)) == [
        ("id", "bigint"), ("name", "string"), ("age", "int"), ("tags", "array<string>")
    ]
    assert collected(store.read(spark, people)) == sort_rows([
        {"id": 1, "name": "ann", "age": None, "tags": None},
        {"id": 2, "name": "bob", "age": None, "tags": None},
        {"id": 3, "name": "cid", "age": 41, "tags": ["x"]},
    ])
    # delta-rs alone sees the new columns too, and an older version keeps its schema.
    assert DeltaTable(people).to_pyarrow_table().column_names == ["id", "name", "age", "tags"]
    assert fields(store.read(spark, people, version=0).schema) == [("id", "bigint"), ("name", "string")]


def test_merge_schema_on_overwrite_adds_columns(spark: SparkSession, store: DeltaTableStore, people: str) -> None:
    store.write(spark.createDataFrame([(9, "zed", True)], "id long, name string, vip boolean"), people,
                mode="overwrite", merge_schema=True)
    assert fields(store.schema(people)) == [("id", "bigint"), ("name", "string"), ("vip", "boolean")]
    assert collected(store.read(spark, people)) == [{"id": 9, "name": "zed", "vip": True}]


def test_new_column_without_merge_schema_is_a_clear_error(
    spark: SparkSession, store: DeltaTableStore, people: str
) -> None:
    batch = spark.createDataFrame([(3, "cid", 41)], "id long, name string, age int")
    for write in (lambda: store.write(batch, people), lambda: store.write(batch, people, mode="overwrite")):
        with pytest.raises(SchemaMismatchError) as caught:
            write()
        message = str(caught.value)
        assert people in message and "'age'" in message and "merge_schema=True" in message
    assert store.version(people) == 0
    assert fields(store.schema(people)) == [("id", "bigint"), ("name", "string")]


def test_type_change_names_the_table_the_column_and_both_types(
    spark: SparkSession, store: DeltaTableStore, people: str
) -> None:
    with pytest.raises(SchemaMismatchError) as caught:
        store.write(spark.createDataFrame([("three", "cid")], "id string, name string"), people, merge_schema=True)
    message = str(caught.value)
    assert caught.value.path == people
    assert people in message and "'id'" in message
    assert "bigint in the table" in message and "string in the data" in message
    assert store.version(people) == 0


def test_int_into_long_is_widened(spark: SparkSession, store: DeltaTableStore, people: str) -> None:
    store.write(spark.createDataFrame([(3, "cid")], "id int, name string"), people)
    assert fields(store.schema(people))[0] == ("id", "bigint")
    assert sorted(r["id"] for r in collected(store.read(spark, people))) == [1, 2, 3]


def test_wider_batch_into_narrower_table_is_refused(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    store.write(spark.createDataFrame([(1,)], "n int"), path)
    with pytest.raises(SchemaMismatchError, match="'n' is int in the table but bigint.*delta.enableTypeWidening"):
        store.write(spark.createDataFrame([(2**40,)], "n long"), path)


def test_a_table_with_type_widening_takes_the_wider_type(
    spark: SparkSession, store: DeltaTableStore, tmp_path: Path
) -> None:
    path = str(tmp_path / "widened")
    widening = {"delta.enableTypeWidening": "true"}
    store.write(spark.createDataFrame([(1, Decimal("1.50"))], "n int, amount decimal(5,2)"), path, layout=TableLayout(widening))

    store.write(spark.createDataFrame([(2**40, Decimal("12345.125"))], "n long, amount decimal(9,3)"), path)
    store.merge(spark.createDataFrame([(1, Decimal("2.000"))], "n long, amount decimal(9,3)"), path, keys=["n"])

    assert fields(store.schema(path)) == [("n", "bigint"), ("amount", "decimal(9,3)")]
    assert sorted((r["n"], float(r["amount"])) for r in collected(store.read(spark, path))) == [
        (1, 2.0), (2**40, 12345.125)]
    # Spark's own Delta reader reads it too; a narrowing is still refused.
    assert spark.read.format("delta").load(path).count() == 2
    with pytest.raises(SchemaMismatchError, match="'amount' is decimal\\(9,3\\) in the table but string"):
        store.write(spark.createDataFrame([(3, "x")], "n long, amount string"), path)


def test_overwrite_schema_replaces_types(spark: SparkSession, store: DeltaTableStore, people: str) -> None:
    store.write(spark.createDataFrame([("a1",)], "id string"), people, mode="overwrite", overwrite_schema=True)
    assert fields(store.schema(people)) == [("id", "string")]
    assert collected(store.read(spark, people)) == [{"id": "a1"}]


def test_all_null_columns_are_stored_as_strings(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    store.write(spark.sql("SELECT 1 AS id, NULL AS note"), path)
    assert fields(store.schema(path)) == [("id", "int"), ("note", "string")]
    store.write(spark.sql("SELECT 2 AS id, NULL AS note"), path)  # null into the string column
    assert collected(store.read(spark, path)) == [{"id": 1, "note": None}, {"id": 2, "note": None}]


def test_duplicate_column_names_are_refused(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    with pytest.raises(SchemaMismatchError, match="'ID' appears twice"):
        store.write(spark.sql("SELECT 1 AS id, 2 AS ID"), path)
    assert not store.exists(path)


def test_plan_write_rules() -> None:
    table = T.StructType([T.StructField("a", T.IntegerType()), T.StructField("f", T.DoubleType())])
    batch = T.StructType([T.StructField("A", T.ShortType()), T.StructField("f", T.FloatType()),
                          T.StructField("n", T.NullType())])
    plan = plan_write("/t", table, batch, merge_schema=True)
    assert plan.casts == {"A": T.IntegerType(), "f": T.DoubleType(), "n": T.StringType()}
    assert plan.new_columns == ["n"]
    assert [f.name for f in plan.table_schema.fields] == ["a", "f", "n"]
    # Nullability is not a type: a non-nullable batch column fits a nullable table column.
    strict = T.StructType([T.StructField("a", T.IntegerType(), nullable=False)])
    assert plan_write("/t", table, strict, merge_schema=False).casts == {}


@pytest.mark.parametrize("source, target", [
    (T.IntegerType(), T.LongType()), (T.FloatType(), T.DoubleType()), (T.DecimalType(5, 2), T.DecimalType(9, 3)),
    (T.IntegerType(), T.DecimalType(10, 0)), (T.LongType(), T.DecimalType(21, 2)), (T.DateType(), T.TimestampType()),
    (T.DateType(), T.TimestampNTZType()), (T.DecimalType(27, 6), T.DoubleType()), (T.LongType(), T.DoubleType()),
])
def test_what_fits_is_cast(source: T.DataType, target: T.DataType) -> None:
    assert fits(source, target)


@pytest.mark.parametrize("source, target", [
    (T.LongType(), T.IntegerType()), (T.DoubleType(), T.FloatType()), (T.DecimalType(9, 3), T.DecimalType(5, 2)),
    (T.IntegerType(), T.DecimalType(9, 0)), (T.DoubleType(), T.DecimalType(38, 18)), (T.StringType(), T.IntegerType()),
    (T.IntegerType(), T.StringType()), (T.TimestampType(), T.DateType()), (T.TimestampNTZType(), T.TimestampType()),
    (T.DecimalType(27, 6), T.FloatType()), (T.BooleanType(), T.IntegerType()),
])
def test_what_does_not_fit_is_refused(source: T.DataType, target: T.DataType) -> None:
    assert not fits(source, target)


def test_a_decimal_fits_a_double_table_column(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    # A replayed quarantined row keeps the query's decimal; the table was made double by its declaration.
    path = str(tmp_path / "hours")
    store.write(spark.createDataFrame([(1.5,)], "hours double"), path)
    store.write(spark.sql("SELECT CAST(2.25 AS DECIMAL(27,6)) AS hours"), path)
    assert fields(store.schema(path)) == [("hours", "double")]
    assert sorted(r["hours"] for r in collected(store.read(spark, path))) == [1.5, 2.25]
