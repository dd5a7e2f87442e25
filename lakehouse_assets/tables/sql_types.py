"""Spark SQL type names (``DOUBLE``, ``DECIMAL(10,2)``, ``ARRAY<STRING>``) read as PySpark
types without a SparkSession, when definitions load: PySpark's ``DataType.fromDDL`` needs a
running session. sqlglot reads the name in Spark's dialect; a name Spark does not know, or a
type a declaration cannot hold to (intervals, ``CHAR``/``VARCHAR``, collations), is refused.
"""

from __future__ import annotations

import sqlglot
from pyspark.sql import types as T
from sqlglot import exp
from sqlglot.errors import SqlglotError

_DType = exp.DataType.Type
_ATOMIC: dict[object, T.DataType] = {
    _DType.BOOLEAN: T.BooleanType(),
    _DType.TINYINT: T.ByteType(),
    _DType.SMALLINT: T.ShortType(),
    _DType.INT: T.IntegerType(),
    _DType.BIGINT: T.LongType(),
    _DType.FLOAT: T.FloatType(),
    _DType.DOUBLE: T.DoubleType(),
    _DType.DATE: T.DateType(),
    _DType.TIMESTAMP: T.TimestampType(),
    _DType.TIMESTAMPTZ: T.TimestampType(),  # sqlglot's name for Spark's TIMESTAMP
    _DType.TIMESTAMPLTZ: T.TimestampType(),
    _DType.TIMESTAMPNTZ: T.TimestampNTZType(),
    _DType.TEXT: T.StringType(),
    _DType.BINARY: T.BinaryType(),
    _DType.VARIANT: T.VariantType(),
}


class UnknownTypeError(ValueError):
    """A type name a declared column cannot take; the message says what to write instead."""


def spark_type(name: str) -> T.DataType:
    """The PySpark type Spark SQL's type ``name`` is (``bigint``, ``DECIMAL(10, 2)``,
    ``struct<a:int>``, in any case). Raises :class:`UnknownTypeError` for a name that is not one."""
    try:
        # In a CAST the type must be all there is before the closing parenthesis (a NOT NULL or
        # COMMENT after it is not a type); read alone, it keeps what a CAST rewrites (CHAR(3)).
        cast = sqlglot.parse_one(f"CAST(NULL AS {name})", dialect="spark")
        node = exp.DataType.build(name, dialect="spark")
    except SqlglotError as exc:
        raise UnknownTypeError(f"{name!r} is not a Spark SQL type (write one such as BIGINT, DOUBLE, "
                               "DECIMAL(10,2), STRING, DATE, TIMESTAMP, ARRAY<STRING>)") from exc
    if any(part.args.get("collate") for part in cast.find_all(exp.DataType)):
        raise _unsupported(name)
    return _converted(node, name)


def _converted(node: exp.DataType, name: str) -> T.DataType:
    kind = node.this
    if kind in _ATOMIC and not node.expressions:
        return _ATOMIC[kind]
    if kind == _DType.DECIMAL:
        digits = [int(p.this.this) for p in node.expressions]
        return T.DecimalType(*digits) if digits else T.DecimalType(10, 0)  # Spark's DECIMAL alone
    if kind == _DType.ARRAY and len(node.expressions) == 1:
        return T.ArrayType(_converted(node.expressions[0], name))
    if kind == _DType.MAP and len(node.expressions) == 2:
        return T.MapType(_converted(node.expressions[0], name), _converted(node.expressions[1], name))
    if kind == _DType.STRUCT:
        return T.StructType([
            T.StructField(field.name, _converted(field.args["kind"], name),
                          not any(isinstance(c.args.get("kind"), exp.NotNullColumnConstraint)
                                  for c in field.args.get("constraints") or ()))
            for field in node.expressions])
    raise _unsupported(name)


def _unsupported(name: str) -> UnknownTypeError:
    return UnknownTypeError(
        f"{name!r} is a type a declared column cannot hold to here: declare a number, BOOLEAN, STRING (no "
        "collation; STRING rather than CHAR/VARCHAR), BINARY, DATE, TIMESTAMP, TIMESTAMP_NTZ, VARIANT, or an "
        "ARRAY, MAP or STRUCT of them")
