"""The bulk and the one-at-a-time formatting must agree, and print the exact values."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lakehouse_assets.simulator._jsonl import (
    heartrate_text,
    record_head,
    record_line,
    record_lines,
    time_text,
)


@pytest.mark.parametrize(("millis", "text"), [(1577836800000, "1577836800.000"),
                                              (1577836800007, "1577836800.007"),
                                              (1609459199999, "1609459199.999"),
                                              (1577836800120, "1577836800.120")])
def test_time_text(millis: int, text: str) -> None:
    assert time_text(millis) == text
    assert json.loads(text) == millis / 1000


@pytest.mark.parametrize(("centi", "text"), [(7250, "72.50"), (4001, "40.01"), (0, "0.00"),
                                             (-100, "-1.00"), (-7687, "-76.87"), (5, "0.05")])
def test_heartrate_text(centi: int, text: str) -> None:
    assert heartrate_text(centi) == text
    assert json.loads(text) == centi / 100


def test_bulk_lines_equal_single_lines() -> None:
    gen = np.random.default_rng(0)
    device, mrn = gen.integers(100, 999, 300), gen.integers(10**7, 10**8, 300)
    time_ms = gen.integers(1577836800000, 1609459200000, 300)
    centi = gen.integers(1, 25000, 300)
    values = list(zip(device.tolist(), mrn.tolist(), time_ms.tolist(), centi.tolist(), strict=True))
    bulk = record_lines(heads=[record_head(d, m) for d, m, _, _ in values],
                        time_ms=time_ms, heartrate_centi=centi)
    single = [record_line(device_id=str(d), mrn=str(m), time=time_text(t),
                          heartrate=heartrate_text(c)) for d, m, t, c in values]
    assert bulk == single
    for line, (d, m, t, c) in zip(bulk, values, strict=True):
        assert json.loads(line) == {"device_id": d, "mrn": m, "time": t / 1000,
                                    "heartrate": c / 100}
