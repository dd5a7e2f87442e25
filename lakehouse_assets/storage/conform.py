"""Fitting rows to a Delta table before they are written, the same for every way a table is
written (a batch write, a merge, Delta's own streaming sink): one rule of what fits
(:func:`~lakehouse_assets.storage._schema.fits`) for the declared types and the table's."""

from __future__ import annotations

from collections.abc import Mapping

from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from lakehouse_assets.storage._schema import WritePlan, plan_write, storable_rows, type_sql
from lakehouse_assets.storage.declared_types import DeclaredTypes
from lakehouse_assets.storage.delta_rs_snapshot import spark_schema
from lakehouse_assets.storage.layout import TableLayout, fit_layout, table_ref
from lakehouse_assets.storage.merge import quote

#: The table property that lets a write widen a column's type (opt-in: not every reader
#: reads a widened table).
TYPE_WIDENING = "delta.enableTypeWidening"


def conformed(df: DataFrame, path: str, table: DeltaTable | None, *, merge_schema: bool = False,
              overwrite_schema: bool = False, layout: TableLayout | None = None,
              declared: DeclaredTypes | None = None) -> tuple[DataFrame, WritePlan]:
    """``df``'s rows as the table at ``path`` (``table``; None before it exists) stores them,
    and the plan of the write: cast to the ``declared`` types first, then fitted to the
    table's. The table is given the ``layout`` (properties, clustering) it lacks, if one is
    declared, and widened where the plan says; raises
    :class:`~lakehouse_assets.errors.SchemaMismatchError` naming the table, the column and
    both types when the rows do not fit."""
    if declared is not None:
        df = declared.fitted(df, path)
    spark = df.sparkSession
    if table is not None and layout is not None:
        fit_layout(spark, path, table, layout)
    current = spark_schema(table) if table is not None else None
    plan = plan_write(path, current, df.schema, merge_schema=merge_schema, overwrite_schema=overwrite_schema,
                      type_widening=allows(table, TYPE_WIDENING, layout.properties if layout else None))
    if table is not None:
        _widen(spark, path, plan.widened)
    return storable_rows(df, plan.casts), plan


def allows(table: DeltaTable | None, feature: str, properties: Mapping[str, str] | None = None) -> bool:
    """Whether the table turns ``feature`` (a ``delta.*`` boolean property) on, or is given
    it now by ``properties``."""
    configured = (table.metadata().configuration or {}) if table is not None else {}
    return any(str(source.get(feature, "false")).lower() == "true" for source in (configured, properties or {}))


def _widen(spark: SparkSession, path: str, widened: Mapping[str, T.DataType]) -> None:
    """Widen the table's columns to the types a batch brings (Delta's type widening), each in
    a commit of its own before the batch's."""
    for column, dtype in widened.items():
        spark.sql(f"ALTER TABLE {table_ref(path)} ALTER COLUMN {quote(column)} TYPE {type_sql(dtype)}")
