"""Delta file statistics from Parquet footers, so readers can skip files without opening them."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

import pyarrow.parquet as pq

# Delta truncates string statistics; longer values are simply left without min/max.
_MAX_STRING_STAT = 32


def file_stats(metadata: pq.FileMetaData) -> dict[str, Any]:
    """``numRecords``, ``minValues``, ``maxValues`` and ``nullCount`` for the top-level
    primitive columns of one Parquet file, in Delta's stats format.

    Bounds are only ever widened (timestamps to whole milliseconds, long strings dropped), so
    a reader that skips files by them never skips a file that holds a matching row.
    """
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    schema = metadata.schema
    for column_index in range(metadata.num_columns):
        column = schema.column(column_index)
        if "." in column.path:  # nested leaf: Delta nests these; we leave them out
            continue
        name = column.path
        lo: Any = None
        hi: Any = None
        null_count = 0
        complete = True
        for rg in range(metadata.num_row_groups):
            stats = metadata.row_group(rg).column(column_index).statistics
            if stats is None:
                complete = False
                break
            if stats.has_null_count:
                null_count += stats.null_count
            else:
                complete = False
            if not stats.has_min_max:
                continue
            lo = stats.min if lo is None else min(lo, stats.min)
            hi = stats.max if hi is None else max(hi, stats.max)
        if not complete:
            continue
        nulls[name] = null_count
        lo_json, hi_json = _json_bound(lo, floor=True), _json_bound(hi, floor=False)
        if lo_json is not None and hi_json is not None:
            mins[name] = lo_json
            maxs[name] = hi_json
    return {
        "numRecords": metadata.num_rows,
        "minValues": mins,
        "maxValues": maxs,
        "nullCount": nulls,
    }


def stats_json(metadata: pq.FileMetaData) -> str:
    """:func:`file_stats` as the JSON string a Delta ``add`` action carries."""
    return json.dumps(file_stats(metadata), separators=(",", ":"))


def _json_bound(value: Any, *, floor: bool) -> Any:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, Decimal):
        return None  # precision could be lost in JSON; skipping stats is always safe
    if isinstance(value, str):
        return value if len(value) <= _MAX_STRING_STAT else None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return None  # timestamp_ntz: not written by this engine
        value = value.astimezone(dt.UTC)
        millis = value.replace(microsecond=(value.microsecond // 1000) * 1000)
        if not floor and millis != value:
            millis += dt.timedelta(milliseconds=1)
        return millis.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis.microsecond // 1000:03d}Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    return None
