"""The ``gold_recomputed`` invariant: each gold table equals a batch recomputation of its
logic from its source table.

Checked for the reference pipeline's two incrementally kept gold tables, recomputed here in
Python from the rows of their sources (the seeds' cells: a mean per patient and day, a count
per device), so the check does not share the SQL or the merge code it judges. A table
declared elsewhere is not recomputed yet: that needs its query run in batch.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lakehouse_assets.reliability import delta_files
from lakehouse_assets.reliability.reading import read_or_report, table_path
from lakehouse_assets.reliability.report import InvariantResult
from lakehouse_assets.settings import LakehouseSettings

GOLD_RECOMPUTED = "gold_recomputed"
_DAY = 86_400


@dataclass(frozen=True)
class ReferenceGold:
    """The reference pipeline's gold tables and the tables they are computed from."""

    bronze: str = "bronze.recordings"
    silver: str = "silver.recordings_enriched"
    daily_patient_avg: str = "gold.daily_patient_avg"
    device_counts: str = "gold.device_counts"


REFERENCE_GOLD = ReferenceGold()


def check_gold_recomputed(settings: LakehouseSettings, *, pending_ok: bool = False,
                          flow: ReferenceGold = REFERENCE_GOLD) -> InvariantResult:
    """daily_patient_avg and device_counts equal their logic (lakehouse_assets.assets.gold)
    recomputed in batch from silver and bronze."""
    result = InvariantResult(GOLD_RECOMPUTED, "the reference gold tables equal a batch recomputation")
    if pending_ok:
        result.skipped = "gold may lag its sources while runs are pending"
        return result
    checked = 0
    silver_path = table_path(settings, flow.silver)
    daily_path = table_path(settings, flow.daily_patient_avg)
    if delta_files.is_table(silver_path):
        checked += 1
        silver = read_or_report(result, flow.silver, silver_path, ["mrn", "name", "time", "heartrate"])
        gold = (read_or_report(result, flow.daily_patient_avg, daily_path, None)
                if delta_files.is_table(daily_path) else None)
        if silver is not None and (gold is not None or not delta_files.is_table(daily_path)):
            _compare_daily(result, flow.daily_patient_avg, silver, gold)
    bronze_path = table_path(settings, flow.bronze)
    counts_path = table_path(settings, flow.device_counts)
    if delta_files.is_table(bronze_path):
        checked += 1
        bronze = read_or_report(result, flow.bronze, bronze_path, ["device_id"])
        gold = (read_or_report(result, flow.device_counts, counts_path, None)
                if delta_files.is_table(counts_path) else None)
        if bronze is not None and (gold is not None or not delta_files.is_table(counts_path)):
            _compare_device_counts(result, flow.device_counts, bronze, gold)
    if not checked:
        result.skipped = "no source tables yet"
    return result


def _compare_daily(result: InvariantResult, table: str, silver: Any, gold: Any) -> None:
    sums: dict[tuple[Any, ...], list[float]] = {}
    for mrn, name, time, heartrate in delta_files.row_tuples(silver, ["mrn", "name", "time", "heartrate"]):
        day = None if time is None else int(_utc(time).timestamp()) // _DAY * _DAY
        acc = sums.setdefault((mrn, name, day), [0.0, 0])
        if heartrate is not None:
            acc[0] += heartrate
            acc[1] += 1
    expected = {k: (s / n if n else None) for k, (s, n) in sums.items()}
    actual: dict[tuple[Any, ...], Any] = {}
    duplicated = []
    rows = delta_files.row_tuples(gold, ["mrn", "name", "date", "avg_heartrate"]) if gold is not None else ()
    for mrn, name, date, avg in rows:
        key = (mrn, name, None if date is None else int(_utc(date).timestamp()))
        if key in actual:
            duplicated.append(f"mrn={mrn} name={name!r} date={_day_text(key[2])}")
        actual[key] = avg
    _compare_groups(result, table, expected, actual, duplicated,
                    lambda k: f"mrn={k[0]} name={k[1]!r} date={_day_text(k[2])}", "avg_heartrate")


def _compare_device_counts(result: InvariantResult, table: str, bronze: Any, gold: Any) -> None:
    expected = dict(Counter(d for (d,) in delta_files.row_tuples(bronze, ["device_id"]) if d is not None))
    actual: dict[tuple[Any, ...], Any] = {}
    duplicated = []
    rows = delta_files.row_tuples(gold, ["device_id", "total_recordings"]) if gold is not None else ()
    for device_id, total in rows:
        if device_id in actual:
            duplicated.append(f"device_id={device_id}")
        actual[device_id] = total
    _compare_groups(result, table, expected, actual, duplicated, lambda k: f"device_id={k}", "total_recordings")


def _compare_groups(result: InvariantResult, table: str, expected: dict[Any, Any], actual: dict[Any, Any],
                    duplicated: list[str], describe: Callable[[Any], str], value: str) -> None:
    if duplicated:
        result.add(table, f"{len(duplicated)} groups appear more than once", duplicated)
    missing = [describe(k) + f" {value}={expected[k]}" for k in expected if k not in actual]
    extra = [describe(k) + f" {value}={actual[k]}" for k in actual if k not in expected]
    wrong = [f"{describe(k)}: {value}={actual[k]}, recomputed {expected[k]}"
             for k in expected if k in actual and not _close(actual[k], expected[k])]
    if missing:
        result.add(table, f"{len(missing)} groups of the recomputation are missing", missing)
    if extra:
        result.add(table, f"{len(extra)} groups have no source rows", extra)
    if wrong:
        result.add(table, f"{len(wrong)} groups differ from the recomputation", wrong)


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def _utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _day_text(seconds: int | None) -> str:
    return "null" if seconds is None else dt.datetime.fromtimestamp(seconds, dt.UTC).date().isoformat()
