"""Hand-built rows for the quality tests, and a plain-Python oracle for the silver rules."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

UTC = dt.UTC

BRONZE_SCHEMA = (
    "device_id BIGINT, mrn BIGINT, time DOUBLE, heartrate DOUBLE, "
    "_rescued_data STRING, _source_file STRING, _source_line BIGINT, _ingested_at TIMESTAMP"
)
SILVER_SCHEMA = ("device_id BIGINT, mrn BIGINT, name STRING, time TIMESTAMP, heartrate DOUBLE, "
                 "_source_file STRING, _source_line BIGINT")
GOLD_AVG_SCHEMA = "mrn BIGINT, name STRING, avg_heartrate DOUBLE, date TIMESTAMP"
PATIENTS = {10000001: "Ann Lee", 10000002: "Bo Chan", 10000003: "Cy Diaz"}
INGESTED = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
T2020 = dt.datetime(2020, 3, 1, 12, 0, tzinfo=UTC).timestamp()


def bronze_row(device_id=1, mrn=10000001, time=T2020, heartrate=72.5, rescued=None,
               source="file:/landing/recordings/0001.json", line=1) -> tuple[Any, ...]:
    return (device_id, mrn, time, heartrate, rescued, source, line, INGESTED)


def silver_row(device_id=1, mrn=10000001, name="Ann Lee", time=None, heartrate=72.5,
               source="file:/landing/recordings/0001.json", line=1) -> tuple[Any, ...]:
    return (device_id, mrn, name, time or dt.datetime.fromtimestamp(T2020, UTC), heartrate, source, line)


def mixed_bronze_rows(count: int, seed: int) -> list[tuple[Any, ...]]:
    """Bronze rows with every kind of defect the simulator lands, and a few more."""
    gen = random.Random(seed)
    rows = []
    for i in range(count):
        kind = gen.choice(["good", "good", "good", "malformed", "wrong_type", "non_positive",
                           "unknown", "too_high", "no_device", "future", "y1999"])
        device, mrn, time, hr, rescued = gen.randint(1, 9), gen.choice(list(PATIENTS)), T2020 + i, 60.0 + gen.random() * 40, None
        if kind == "malformed":
            device, mrn, time, hr, rescued = None, None, None, None, '{"_raw": "{\\"device_id\\": 3, \\"mr"}'
        elif kind == "wrong_type":
            hr, rescued = None, '{"heartrate": "abc"}'
        elif kind == "non_positive":
            hr = gen.choice([0.0, -1.0, -hr])
        elif kind == "unknown":
            mrn = 99999999
        elif kind == "too_high":
            hr = 301.0
        elif kind == "no_device":
            device = None
        elif kind == "future":
            time = (dt.datetime.now(UTC) + dt.timedelta(days=3)).timestamp()
        elif kind == "y1999":
            time = dt.datetime(1999, 12, 31, tzinfo=UTC).timestamp()
        rows.append(bronze_row(device, mrn, time, hr, rescued))
    return rows


def failed_silver_rules(row: tuple[Any, ...]) -> list[str]:
    """The ERROR routing rules a bronze row fails, in the rules' order, computed in Python:
    the oracle the Spark routing is compared with."""
    device_id, mrn, time, heartrate, rescued, _, _, _ = row
    now = dt.datetime.now(UTC).timestamp()
    failed = []
    if rescued not in (None, "", "{}"):
        failed.append("rescued_data_empty")
    if PATIENTS.get(mrn) is None:
        failed.append("known_patient")
    if mrn is None or mrn <= 0:
        failed.append("mrn_positive")
    if heartrate is None or not heartrate > 0:
        failed.append("heartrate_positive")
    if heartrate is None or not heartrate <= 300:
        failed.append("heartrate_in_range")
    if time is None or not (dt.datetime(2000, 1, 1, tzinfo=UTC).timestamp() <= time <= now + 86400):
        failed.append("time_plausible")
    return failed
