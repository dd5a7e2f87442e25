"""The benchmarks land 20 files of 5,000 records and 1,000 files of 10; both must be quick.

Bounds are several times what a loaded laptop needs, so they catch a slow path (say,
formatting records through json.dumps one by one), not a busy machine.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lakehouse_assets.simulator import land


@pytest.mark.parametrize(("files", "records_per_file", "seconds"),
                         [(20, 5_000, 8), (1_000, 10, 15)])
def test_benchmark_shapes_land_quickly(tmp_path: Path, files: int, records_per_file: int,
                                       seconds: float) -> None:
    started = time.perf_counter()
    result = land(tmp_path, files=files, records_per_file=records_per_file, bad_rate=0.01, seed=1)
    elapsed = time.perf_counter() - started
    assert result.counts.total == files * records_per_file
    assert elapsed < seconds, f"{files} x {records_per_file} took {elapsed:.1f}s"
