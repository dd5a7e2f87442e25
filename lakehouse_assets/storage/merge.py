"""Changing rows in place: the one ``MERGE INTO`` statement shape Delta Lake runs for every
upsert, AUTO CDC batch and quarantine replay. Rows are upserted by their keys (null matching
null); with ``replacing``, the rows of those groups the batch has no row for are deleted. Rows
the table already holds as they are take no part: Delta would rewrite their files and record
them as updates in the change data feed.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.errors import LakehouseError

# The source's flag of a row whose key is to be deleted.
_DELETE = "__lakehouse_delete"


@dataclass(frozen=True)
class MergePlan:
    """What one merge changes in the table ``table_ref`` (a SQL table reference): the
    ``rows`` upserted by ``keys``, and the groups ``replacing`` (by its columns) the rows
    replace whole."""

    table_ref: str
    rows: DataFrame
    keys: Sequence[str]
    replacing: DataFrame | None = None


@contextmanager
def merge_statement(plan: MergePlan) -> Iterator[str]:
    """The ``MERGE INTO`` statement applying ``plan``, valid while the context is open (it
    reads the batch and its groups as temporary views, dropped on leaving)."""
    spark = plan.rows.sparkSession
    tag = uuid.uuid4().hex
    rows_view, groups_view = f"lakehouse_merge_{tag}", f"lakehouse_merge_groups_{tag}"
    plan.rows.createOrReplaceTempView(rows_view)
    if plan.replacing is not None:
        plan.replacing.createOrReplaceTempView(groups_view)
    try:
        yield _statement(plan, rows_view, groups_view)
    finally:
        spark.catalog.dropTempView(rows_view)
        if plan.replacing is not None:
            spark.catalog.dropTempView(groups_view)


def _statement(plan: MergePlan, rows_view: str, groups_view: str) -> str:
    columns = [quote(c) for c in plan.rows.columns]
    keys = [quote(k) for k in plan.keys]
    target = plan.table_ref
    same_row = " AND ".join(f"s.{c} <=> t.{c}" for c in columns)
    source = f"SELECT s.*, false AS {_DELETE} FROM {rows_view} s LEFT ANTI JOIN {target} t ON {same_row}"
    if plan.replacing is not None:
        in_group = " AND ".join(f"t.{quote(g)} <=> g.{quote(g)}" for g in plan.replacing.columns)
        same_key = " AND ".join(f"t.{k} <=> s.{k}" for k in keys)
        key_set = set(keys)
        kept = ", ".join(f"t.{c}" if c in key_set else f"NULL AS {c}" for c in columns)
        source += (f" UNION ALL SELECT DISTINCT {kept}, true AS {_DELETE} FROM {target} t "
                   f"LEFT SEMI JOIN {groups_view} g ON {in_group} LEFT ANTI JOIN {rows_view} s ON {same_key}")
    on = " AND ".join(f"t.{k} <=> s.{k}" for k in keys)
    return (
        f"MERGE INTO {plan.table_ref} t USING ({source}) s ON {on} "
        f"WHEN MATCHED AND s.{_DELETE} THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in columns)} "
        f"WHEN NOT MATCHED AND NOT s.{_DELETE} THEN INSERT ({', '.join(columns)}) "
        f"VALUES ({', '.join(f's.{c}' for c in columns)})"
    )


def sql_literal(value: object) -> str:
    """``value`` (a date, timestamp, number or string Spark returned) as a SQL literal:
    Delta's MERGE does not bind query parameters."""
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | decimal.Decimal):
        return repr(value) if not isinstance(value, decimal.Decimal) else f"{value}BD"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise LakehouseError(f"No SQL literal for a value of type {type(value).__name__} ({value!r}): "
                         "use a date, timestamp, number or string")


def quote(name: str) -> str:
    """A column or path as a SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def in_range_of(rows: DataFrame, batch: DataFrame, columns: Sequence[str]) -> DataFrame:
    """``rows`` within ``batch``'s range (its least to its greatest value) of each of
    ``columns``: a filter Spark pushes to the Parquet reader, which skips the row groups
    outside it. Costs one small job on ``batch``; no rows when it has none."""
    bounds = batch.agg(*[agg(F.col(c)).alias(f"{name}_{c}") for c in columns
                         for name, agg in (("lo", F.min), ("hi", F.max))]).first()
    kept = rows
    for c in columns:
        low, high = (None, None) if bounds is None else (bounds[f"lo_{c}"], bounds[f"hi_{c}"])
        if low is None:
            return rows.limit(0)
        kept = kept.where(F.col(c).between(F.lit(low), F.lit(high)))
    return kept
