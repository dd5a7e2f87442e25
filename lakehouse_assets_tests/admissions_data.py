"""Ward admissions to land for the admissions package's tests: CSV files with a header, a
share of them bad on purpose (no ward, a discharge before the admission, a line that is not
CSV of four values), the same files for the same seed, numbered after those landed before."""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from pathlib import Path

HEADER = "admission_id,ward,admitted,discharged"
WARDS = ("cardiology", "oncology", "neurology", "maternity")
START = dt.datetime(2026, 11, 1)


def land_admissions(landing: Path, *, files: int, seed: int, rows_per_file: int = 40,
                    bad_rate: float = 0.1) -> tuple[int, int]:
    """Land ``files`` more files into ``landing`` (settled: modified a minute ago); how many
    files and records were landed."""
    landing = Path(landing)
    landing.mkdir(parents=True, exist_ok=True)
    first = len(list(landing.glob("admissions-*.csv")))
    settled = time.time() - 60
    records = 0
    for number in range(first, first + files):
        rng = random.Random(seed * 100_003 + number)
        lines = [HEADER]
        for row in range(rows_per_file):
            admission = number * rows_per_file + row + 1
            admitted = START + dt.timedelta(hours=number * 24 + row, minutes=rng.randrange(60))
            discharged = admitted + dt.timedelta(hours=rng.uniform(1, 240))
            ward = rng.choice(WARDS)
            if rng.random() < bad_rate:
                ward, discharged = rng.choice([("", discharged), (ward, admitted - dt.timedelta(hours=3))])
            lines.append(f"{admission},{ward},{admitted:%Y-%m-%d %H:%M:%S},{discharged:%Y-%m-%d %H:%M:%S}")
        if rng.random() < 0.5:
            lines.append('not,"a closed quote')  # malformed: rescued in bronze, quarantined in silver
        path = landing / f"admissions-{number:05d}.csv"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (settled, settled))
        records += len(lines) - 1
    return files, records
