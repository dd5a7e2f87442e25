"""What the gold tables must hold, computed without Spark or Dagster, and a Delta reader.

The expected values come straight from the landed files (JSON lines and the patients CSV)
with the standard library, so a bug shared by the pipeline's Spark code cannot hide itself.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

DayKey = tuple[int, dt.date]


@dataclass(frozen=True)
class ExpectedGold:
    """Gold as the landed files say it must be."""

    #: (mrn, UTC day) -> (patient name, mean heart rate) over records with heartrate > 0
    #: of known patients.
    daily_patient_avg: Mapping[DayKey, tuple[str, float]]
    #: device_id -> recordings landed (bronze keeps every parsed record).
    device_counts: Mapping[int, int]
    #: Records that reach silver.recordings_enriched.
    enriched_rows: int


def expected_gold(landing_root: Path) -> ExpectedGold:
    """Compute gold from ``<landing_root>/recordings/*.json`` and the patients CSV."""
    with (landing_root / "patients" / "patients.csv").open(newline="") as handle:
        names = {int(row["mrn"]): row["name"] for row in csv.DictReader(handle)}
    sums: dict[DayKey, float] = defaultdict(float)
    counts: Counter[DayKey] = Counter()
    devices: Counter[int] = Counter()
    for path in sorted((landing_root / "recordings").glob("recordings-*.json")):
        for line in path.read_text().splitlines():
            record = json.loads(line)  # the tests land with bad_rate=0: every line parses
            devices[int(record["device_id"])] += 1
            mrn, heartrate = int(record["mrn"]), float(record["heartrate"])
            if heartrate <= 0 or mrn not in names:
                continue
            day = dt.datetime.fromtimestamp(math.floor(record["time"]), tz=dt.UTC).date()
            sums[(mrn, day)] += heartrate
            counts[(mrn, day)] += 1
    daily = {key: (names[key[0]], sums[key] / counts[key]) for key in counts}
    return ExpectedGold(daily_patient_avg=daily, device_counts=dict(devices), enriched_rows=sum(counts.values()))


def read_delta(path: Path) -> list[dict[str, Any]] | None:
    """The rows of the Delta table at ``path`` (its latest version), or None if it does not
    exist yet. Reads through an explicit local filesystem: delta-rs's default object store
    can crash the process at interpreter exit."""
    try:
        table = DeltaTable(str(path))
    except TableNotFoundError:
        return None
    filesystem = pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem())
    return table.to_pyarrow_dataset(filesystem=filesystem).to_table().to_pylist()


def daily_avg_differences(rows: list[dict[str, Any]] | None, expected: ExpectedGold) -> list[str]:
    """How ``gold/daily_patient_avg`` differs from the expectation; empty when it matches."""
    if rows is None:
        return ["gold/daily_patient_avg does not exist yet"]
    actual: dict[DayKey, tuple[str, float]] = {}
    for row in rows:
        key = (int(row["mrn"]), row["date"].astimezone(dt.UTC).date())
        if key in actual:
            return [f"duplicate row for {key}"]
        actual[key] = (row["name"], float(row["avg_heartrate"]))
    wanted = expected.daily_patient_avg
    problems = []
    missing, extra = wanted.keys() - actual.keys(), actual.keys() - wanted.keys()
    if missing:
        problems.append(f"{len(missing)} of {len(wanted)} (mrn, day) rows missing, e.g. {sorted(missing)[:3]}")
    if extra:
        problems.append(f"{len(extra)} unexpected (mrn, day) rows, e.g. {sorted(extra)[:3]}")
    wrong = [
        (key, actual[key], wanted[key])
        for key in wanted.keys() & actual.keys()
        if actual[key][0] != wanted[key][0] or not math.isclose(actual[key][1], wanted[key][1], rel_tol=1e-9)
    ]
    if wrong:
        problems.append(f"{len(wrong)} rows with a wrong name or average, e.g. {wrong[:3]}")
    return problems


def device_count_differences(rows: list[dict[str, Any]] | None, expected: ExpectedGold) -> list[str]:
    """How ``gold/device_counts`` differs from the expectation; empty when it matches."""
    if rows is None:
        return ["gold/device_counts does not exist yet"]
    actual = {int(row["device_id"]): int(row["total_recordings"]) for row in rows}
    if actual != expected.device_counts:
        return [
            f"device_counts: {sum(actual.values())} recordings over {len(actual)} devices, expected "
            f"{sum(expected.device_counts.values())} over {len(expected.device_counts)}"
        ]
    return []


def wait_for_gold(
    root: Path,
    expected: ExpectedGold,
    *,
    timeout: float,
    poll_seconds: float = 2.0,
    on_poll: Callable[[], None] | None = None,
) -> float:
    """Poll both gold tables under ``root`` until they match ``expected``; return the seconds
    waited. ``on_poll`` runs every round (e.g. to fail fast on a failed run). Raises
    AssertionError with the remaining differences after ``timeout``."""
    started = time.monotonic()
    while True:
        problems = daily_avg_differences(read_delta(root / "gold" / "daily_patient_avg"), expected)
        problems += device_count_differences(read_delta(root / "gold" / "device_counts"), expected)
        if not problems:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"gold did not match the landed data within {timeout:.0f}s: " + "; ".join(problems))
        if on_poll is not None:
            on_poll()
        time.sleep(poll_seconds)
