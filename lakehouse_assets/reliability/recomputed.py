"""The ``gold_recomputed`` invariant: every table kept incrementally (a grouped streaming table,
Spark's stateful aggregation merged by its group keys) equals its declared query run by Spark in
batch over its sources as they stand (``STREAM(x)`` read as ``x``). Groups are matched by the
table's merge keys, numbers within a relative 1e-9 (a sum added up batch by batch is not bit for
bit the one over all rows at once); the table's rows are read with the independent reader.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from lakehouse_assets.reliability import table_reader
from lakehouse_assets.reliability.flows import Flows, Recomputation
from lakehouse_assets.reliability.report import InvariantResult
from lakehouse_assets.reliability.table_reader import read_or_report, table_path
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage.discovery import is_table
from lakehouse_assets.tables import LakehouseTables

GOLD_RECOMPUTED = "gold_recomputed"


def check_gold_recomputed(settings: LakehouseSettings, flows: Flows, lakehouse_tables: Callable[[], LakehouseTables], *,
                          pending_ok: bool = False) -> InvariantResult:
    """Each table of ``flows.recomputations`` holds what its query computes in batch now;
    ``lakehouse_tables`` gives the tables by name in the Spark session to run the queries in
    (asked for only when there is one to run)."""
    result = InvariantResult(GOLD_RECOMPUTED, "every table kept incrementally equals a batch recomputation")
    if pending_ok:
        result.skipped = "a table may lag its sources while runs are pending"
        return result
    tables: LakehouseTables | None = None
    for recomputation in flows.recomputations:
        path = table_path(settings, recomputation.table)
        if not is_table(path):
            continue
        result.checked.append(recomputation.table)
        actual = read_or_report(result, settings, recomputation.table, None)
        if actual is None:
            continue
        tables = tables or lakehouse_tables()
        try:
            expected = tables.sql(recomputation.query).toArrow()
        except Exception as exc:  # noqa: BLE001 - a source that cannot be read is a finding, not a crash
            result.add(recomputation.table, f"cannot recompute it: its query failed over its sources "
                       f"({_spark_error(exc)})")
            continue
        _compare(result, recomputation, expected, actual)
    if not result.checked:
        result.skipped = "no table kept incrementally yet" if flows.recomputations else "no table kept incrementally"
    return result


def _spark_error(exc: Exception) -> str:
    """What failed, from a Spark error: its first line naming an error class (``[FAILED_READ_FILE...]``),
    not py4j's "An error occurred while calling ..."."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = next((line for line in lines if line.startswith(("[", ": org.")) or "] " in line), None)
    return (named or (lines[0] if lines else type(exc).__name__))[:400]


def _compare(result: InvariantResult, recomputation: Recomputation, expected: Any, actual: Any) -> None:
    table, keys = recomputation.table, list(recomputation.keys)
    values = [c for c in expected.column_names if c not in keys]
    missing_columns = [c for c in expected.column_names if c not in actual.column_names]
    if missing_columns:
        result.add(table, f"the table lacks the columns {missing_columns} its query computes")
        return
    recomputed = _groups(expected, keys, values)
    held = _groups(actual, keys, values)
    duplicated = [key for key, times in Counter(_rows(actual, keys)).items() if times > 1]

    def describe(key: tuple[Any, ...]) -> str:
        return " ".join(f"{k}={v!r}" for k, v in zip(keys, key, strict=True))

    def shown(row: tuple[Any, ...]) -> str:
        return ", ".join(f"{c}={v!r}" for c, v in zip(values, row, strict=True))

    if duplicated:
        result.add(table, f"{len(duplicated)} groups appear more than once", [describe(k) for k in duplicated])
    missing = [f"{describe(k)}: {shown(v)}" for k, v in recomputed.items() if k not in held]
    extra = [f"{describe(k)}: {shown(v)}" for k, v in held.items() if k not in recomputed]
    wrong = [f"{describe(k)}: {shown(held[k])}, recomputed {shown(v)}"
             for k, v in recomputed.items() if k in held and not all(map(_close, held[k], v))]
    if missing:
        result.add(table, f"{len(missing)} groups of the recomputation are missing", missing)
    if extra:
        result.add(table, f"{len(extra)} groups have no source rows", extra)
    if wrong:
        result.add(table, f"{len(wrong)} groups differ from the recomputation", wrong)


def _groups(rows: Any, keys: list[str], values: list[str]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    return {row[:len(keys)]: row[len(keys):] for row in _rows(rows, [*keys, *values])}


def _rows(rows: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    """The rows' values, times in UTC (Spark hands them in the session's zone, Delta in UTC)."""
    return [tuple(_utc(v) for v in row) for row in table_reader.row_tuples(rows, columns)]


def _utc(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    return value


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)
