"""Schemas across Spark, Arrow and Delta, and the rules for writing a batch into a table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from lakehouse_assets.errors import SchemaMismatchError
from lakehouse_assets.storage.merge import quote

# Integer types, narrowest first: a narrower batch column is written into a wider table
# column, as Delta's store assignment does.
_INTEGRAL_ORDER = [T.ByteType, T.ShortType, T.IntegerType, T.LongType]
# The most digits a value of each integer type has.
_INTEGRAL_DIGITS: dict[type[T.DataType], int] = {T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 19}


def arrow_to_spark(schema: pa.Schema) -> T.StructType:
    """The Spark schema of an Arrow schema (Delta ``timestamp`` becomes ``TimestampType``)."""
    return from_arrow_schema(schema, prefer_timestamp_ntz=False)


def storable(schema: T.StructType) -> T.StructType:
    """The schema as a table stores it: all-null (void) columns become strings, since Delta
    has no void type, and every field is nullable."""
    return T.StructType(
        [
            T.StructField(f.name, T.StringType() if isinstance(f.dataType, T.NullType) else f.dataType, True)
            for f in schema.fields
        ]
    )


@dataclass(frozen=True)
class WritePlan:
    """How a batch goes into a table: the table's schema after the write, and the batch
    columns that must be cast to the table's type first."""

    table_schema: T.StructType
    casts: dict[str, T.DataType]
    new_columns: list[str]
    #: Table columns whose type the batch widens (Delta's type widening), with the new type.
    widened: dict[str, T.DataType] = field(default_factory=dict)


def plan_write(
    path: str,
    table_schema: T.StructType | None,
    batch_schema: T.StructType,
    *,
    merge_schema: bool,
    overwrite_schema: bool = False,
    type_widening: bool = False,
) -> WritePlan:
    """Decide how ``batch_schema`` is written into a table whose schema is ``table_schema``
    (None for a new table). A batch column that :func:`fits` the table's type is cast to it;
    a wider one widens the table's column when the table allows it (``type_widening``: its
    ``delta.enableTypeWidening``). Raises :class:`SchemaMismatchError` naming the column and
    both types when the batch cannot be written."""
    _check_unique_names(path, batch_schema)
    if table_schema is None or overwrite_schema:
        target = storable(batch_schema)
        null_casts: dict[str, T.DataType] = {
            f.name: T.StringType() for f in batch_schema.fields if isinstance(f.dataType, T.NullType)
        }
        return WritePlan(target, null_casts, [])

    by_name = {f.name.lower(): f for f in table_schema.fields}
    casts: dict[str, T.DataType] = {}
    widened: dict[str, T.DataType] = {}
    new_fields: list[T.StructField] = []
    for column in batch_schema.fields:
        existing = by_name.get(column.name.lower())
        if existing is None:
            new_fields.append(column)
            continue
        if same_type(existing.dataType, column.dataType):
            continue
        if isinstance(column.dataType, T.NullType) or fits(column.dataType, existing.dataType):
            casts[column.name] = existing.dataType
            continue
        if type_widening and _is_widening(existing.dataType, column.dataType):
            widened[existing.name] = column.dataType
            continue
        widen = (" The table could take it: set its table property delta.enableTypeWidening = true "
                 "(some readers cannot read widened tables)." if _is_widening(existing.dataType, column.dataType)
                 else "")
        raise SchemaMismatchError(
            path,
            f"column {existing.name!r} is {existing.dataType.simpleString()} in the table but "
            f"{column.dataType.simpleString()} in the data being written. Cast the column in the "
            f"query, or full-refresh the table to change its type.{widen}",
        )
    if new_fields and not merge_schema:
        names = ", ".join(repr(f.name) for f in new_fields)
        raise SchemaMismatchError(
            path,
            f"the data has columns the table does not: {names}. Enable schema merging "
            "(merge_schema=True) to add them, or drop them in the query.",
        )
    stored_new = storable(T.StructType(new_fields))
    for f in new_fields:
        if isinstance(f.dataType, T.NullType):
            casts[f.name] = T.StringType()
    kept = [T.StructField(f.name, widened.get(f.name, f.dataType), True) for f in table_schema.fields]
    target = T.StructType(kept + list(stored_new.fields))
    return WritePlan(target, casts, [f.name for f in new_fields], widened)


def _check_unique_names(path: str, schema: T.StructType) -> None:
    seen: set[str] = set()
    for column in schema.fields:
        key = column.name.lower()
        if key in seen:
            raise SchemaMismatchError(
                path, f"column {column.name!r} appears twice (names are case-insensitive); rename one"
            )
        seen.add(key)


def same_type(a: T.DataType, b: T.DataType) -> bool:
    """Equal types, ignoring nullability (tables store every field as nullable)."""
    return _strip_nullability(a) == _strip_nullability(b)


def _strip_nullability(dtype: T.DataType) -> T.DataType:
    if isinstance(dtype, T.StructType):
        return T.StructType([T.StructField(f.name, _strip_nullability(f.dataType), True) for f in dtype.fields])
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(_strip_nullability(dtype.elementType), True)
    if isinstance(dtype, T.MapType):
        return T.MapType(_strip_nullability(dtype.keyType), _strip_nullability(dtype.valueType), True)
    return dtype


def _is_widening(source: T.DataType, target: T.DataType) -> bool:
    """Whether every ``source`` value is a ``target`` value: integers to wider integers,
    float to double, a decimal to one with as many integer and fraction digits or more (the
    changes Delta's type widening makes too)."""
    if isinstance(source, T.IntegralType) and isinstance(target, T.IntegralType):
        return _INTEGRAL_ORDER.index(type(source)) < _INTEGRAL_ORDER.index(type(target))
    if isinstance(source, T.DecimalType) and isinstance(target, T.DecimalType):
        return (target.scale >= source.scale and target.precision - target.scale >= source.precision - source.scale
                and target != source)
    return isinstance(source, T.FloatType) and isinstance(target, T.DoubleType)


def fits(source: T.DataType, target: T.DataType) -> bool:
    """Whether a ``source`` value is stored in a ``target`` column by a cast, as every write
    and a declared column type cast them: each widening (:func:`_is_widening`), an integer
    into a decimal with room for its digits, a date into a timestamp (midnight), and any
    number into a double. The double is the one that can round: an integer past 2**53 or a
    decimal of more than about 15 significant digits is stored as the nearest double, as a
    column of that type asks."""
    if _is_widening(source, target):
        return True
    if isinstance(source, T.IntegralType) and isinstance(target, T.DecimalType):
        return target.precision - target.scale >= _INTEGRAL_DIGITS[type(source)]
    if isinstance(source, T.DateType):
        return isinstance(target, T.TimestampType | T.TimestampNTZType)
    return isinstance(source, T.NumericType) and isinstance(target, T.DoubleType)


def type_sql(dtype: T.DataType) -> str:
    """``dtype`` as Spark SQL writes it, nested field names quoted, for casts and DDL."""
    if isinstance(dtype, T.StructType):
        fields = ",".join(f"`{f.name.replace('`', '``')}`:{type_sql(f.dataType)}" for f in dtype.fields)
        return f"struct<{fields}>"
    if isinstance(dtype, T.ArrayType):
        return f"array<{type_sql(dtype.elementType)}>"
    if isinstance(dtype, T.MapType):
        return f"map<{type_sql(dtype.keyType)},{type_sql(dtype.valueType)}>"
    return dtype.simpleString()


def holds_strings(dtype: T.DataType) -> bool:
    """Whether ``dtype`` is or contains a string type."""
    if isinstance(dtype, T.StructType):
        return any(holds_strings(f.dataType) for f in dtype.fields)
    if isinstance(dtype, T.ArrayType):
        return holds_strings(dtype.elementType)
    if isinstance(dtype, T.MapType):
        return holds_strings(dtype.keyType) or holds_strings(dtype.valueType)
    return isinstance(dtype, T.StringType)


def storable_rows(df: DataFrame, casts: Mapping[str, T.DataType] | None = None) -> DataFrame:
    """``df`` as a table stores it: ``casts`` (a write plan's) applied, and every
    string-holding column re-declared by its SQL type name. Over Spark Connect a cast to
    ``StringType()`` or a Python UDF's string result arrives with an explicit ``UTF8_BINARY``
    collation, which Delta stores as ``string collate UTF8_BINARY``, a type deltalake, DuckDB
    and Trino cannot read; a type name in SQL means Spark's default string."""
    casts = casts or {}
    types = {f.name: casts.get(f.name, f.dataType) for f in df.schema.fields}
    redeclared = {c: t for c, t in types.items() if c in casts or holds_strings(t)}
    if not redeclared:
        return df
    return df.select(*[F.col(quote(c)).cast(type_sql(redeclared[c])).alias(c) if c in redeclared
                       else F.col(quote(c)) for c in df.columns])
