"""File statistics in the Delta log: numRecords, minValues, maxValues and nullCount per data file
agree with the rows in that file, computed here from the data itself (not from Parquet footers)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.storage._parquet_stats import file_stats

from .helpers import ALL_TYPES_ROWS, UTC

LONG_TEXT = "x" * 40  # longer than the 32 characters Delta keeps: no string bounds for its file


def _rows() -> list[tuple[Any, ...]]:
    rows = list(ALL_TYPES_ROWS)
    for n in range(10, 30):
        rows.append((
            n, n * 1000, n / 4, f"name-{n:02d}", n % 2 == 0, dt.date(2023, 1, 1) + dt.timedelta(days=n),
            dt.datetime(2023, 6, 1, 12, 0, n, n * 1111, tzinfo=UTC), Decimal(n) / 8,
            [n], (f"s{n}", n, None),
        ))
    rows.append((99, None, float("-inf"), LONG_TEXT, None, None, None, None, None, None))
    return rows


def _log_adds(table: Path) -> list[dict[str, Any]]:
    adds = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            if line.strip() and "add" in (action := json.loads(line)):
                adds.append(action["add"])
    return adds


def _timestamp_bound(value: dt.datetime, *, upper: bool) -> str:
    value = value.astimezone(UTC)
    millis = value.replace(microsecond=value.microsecond // 1000 * 1000)
    if upper and millis != value:
        millis += dt.timedelta(milliseconds=1)
    return millis.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis.microsecond // 1000:03d}Z"


def _expected_stats(data: pa.Table) -> dict[str, Any]:
    """Delta stats of a file's rows: bounds for orderable primitive columns (never for
    booleans, decimals, nested columns or strings past 32 characters), null counts for every
    top-level primitive column."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in data.column_names:
        column = data.column(name)
        if pa.types.is_nested(column.type):
            continue
        nulls[name] = column.null_count
        if column.null_count == len(column) or pa.types.is_boolean(column.type) or pa.types.is_decimal(column.type):
            continue
        bounds = pc.min_max(column).as_py()
        lo, hi = bounds["min"], bounds["max"]
        if pa.types.is_floating(column.type) and any(v in (float("inf"), float("-inf")) for v in (lo, hi)):
            continue
        if pa.types.is_string(column.type) and max(len(v) for v in column.drop_null().to_pylist()) > 32:
            continue
        if pa.types.is_timestamp(column.type):
            lo, hi = _timestamp_bound(lo, upper=False), _timestamp_bound(hi, upper=True)
        elif pa.types.is_date(column.type):
            lo, hi = lo.isoformat(), hi.isoformat()
        mins[name], maxs[name] = lo, hi
    return {"numRecords": data.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


def test_delta_rs_reads_the_stats(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    store.write(spark.createDataFrame([(n, f"v{n}" if n % 3 else None) for n in range(1, 11)], "n long, v string")
                .coalesce(1), path)

    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    assert len(actions) == 1
    action = actions[0]
    assert action["num_records"] == 10
    assert (action["min.n"], action["max.n"], action["null_count.n"]) == (1, 10, 0)
    assert (action["min.v"], action["max.v"], action["null_count.v"]) == ("v1", "v8", 3)


def test_stats_of_several_row_groups(tmp_path: Path) -> None:
    file = tmp_path / "f.parquet"
    data = pa.table({
        "n": pa.array([5, None, -3, 8, None, 1], pa.int32()),
        "s": pa.array(["m", "b", None, "z", "a", "q"]),
        "nothing": pa.array([None] * 6, pa.int64()),
        "ts": pa.array([dt.datetime(2024, 1, 1, 0, 0, 0, 999, tzinfo=UTC), None, None,
                        dt.datetime(2024, 1, 2, 0, 0, 0, 1001, tzinfo=UTC), None, None], pa.timestamp("us", "UTC")),
    })
    pq.write_table(data, file, row_group_size=2)
    metadata = pq.read_metadata(file)
    assert metadata.num_row_groups == 3

    assert file_stats(metadata) == {
        "numRecords": 6,
        "minValues": {"n": -3, "s": "a", "ts": "2024-01-01T00:00:00.000Z"},
        "maxValues": {"n": 8, "s": "z", "ts": "2024-01-02T00:00:00.002Z"},
        "nullCount": {"n": 2, "s": 1, "nothing": 6, "ts": 4},
    }


@pytest.mark.parametrize(
    ("column", "kept"),
    [
        (pa.array(["short", "y" * 33]), False),
        (pa.array(["short", "y" * 32]), True),
        (pa.array([Decimal("1.5"), Decimal("2.5")]), False),
        (pa.array([True, False]), False),
        (pa.array([1.0, float("inf")]), False),
    ],
)
def test_bounds_are_left_out_rather_than_narrowed(tmp_path: Path, column: pa.Array, kept: bool) -> None:
    file = tmp_path / "f.parquet"
    pq.write_table(pa.table({"c": column}), file)
    stats = file_stats(pq.read_metadata(file))
    assert ("c" in stats["minValues"]) is kept and ("c" in stats["maxValues"]) is kept
    assert stats["nullCount"] == {"c": 0}
