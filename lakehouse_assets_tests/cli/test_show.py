"""``lakehouse show TABLE``: rows at the latest version or an earlier one, readably."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa

from lakehouse_assets_tests.cli.helpers import Runner, write_table

UTC = dt.UTC


def make_table(root: Path) -> None:
    first = pa.table({
        "mrn": pa.array([1, 2], pa.int64()),
        "name": ["Ann", None],
        "heartrate": [72.5, None],
        "time": pa.array([dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC), None],
                         pa.timestamp("us", tz="UTC")),
    })
    write_table(root, "gold.daily_patient_avg", first)
    write_table(root, "gold.daily_patient_avg", first.slice(0, 1).set_column(0, "mrn", pa.array([3], pa.int64())))


def test_show_prints_nulls_and_readable_times(lakehouse: Runner, root: Path) -> None:
    make_table(root)
    result = lakehouse("show", "gold.daily_patient_avg")
    assert result.code == 0, str(result)
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["mrn", "name", "heartrate", "time"]
    rows = {line.split()[0]: line for line in lines[2:5]}
    assert rows["1"].split() == ["1", "Ann", "72.5", "2020-01-02", "03:04:05", "UTC"]
    assert rows["2"].split() == ["2", "NULL", "NULL", "NULL"]
    assert "3 of 3 rows of gold.daily_patient_avg at version 1 (latest)" in result.stdout


def test_show_an_earlier_version_as_json(lakehouse: Runner, root: Path) -> None:
    make_table(root)
    result = lakehouse("show", "gold.daily_patient_avg", "--version", "0", "--json")
    assert result.code == 0, str(result)
    report = json.loads(result.stdout)
    assert (report["version"], report["latest_version"], report["total_rows"]) == (0, 1, 2)
    assert sorted(r["mrn"] for r in report["rows"]) == [1, 2]
    ann = next(r for r in report["rows"] if r["mrn"] == 1)
    assert ann == {"mrn": 1, "name": "Ann", "heartrate": 72.5, "time": "2020-01-02T03:04:05+00:00"}


def test_show_limit(lakehouse: Runner, root: Path) -> None:
    make_table(root)
    report = json.loads(lakehouse("show", "gold.daily_patient_avg", "--limit", "1", "--json").stdout)
    assert len(report["rows"]) == 1 and report["total_rows"] == 3


def test_show_a_version_that_does_not_exist(lakehouse: Runner, root: Path) -> None:
    make_table(root)
    result = lakehouse("show", "gold.daily_patient_avg", "--version", "5")
    assert result.code == 1, str(result)
    assert "gold.daily_patient_avg has no version 5: its versions run from 0 to 1" in result.stderr
    assert "lakehouse history gold.daily_patient_avg" in result.stderr


def test_show_a_missing_table(lakehouse: Runner, root: Path) -> None:
    result = lakehouse("show", "gold.nothing_here")
    assert result.code == 1, str(result)
    assert f"No table gold.nothing_here: nothing at {root / 'gold' / 'nothing_here'}, and no asset declares it" \
        in result.stderr
    assert "no tables under" in result.stderr
    assert "Traceback" not in result.stderr


def test_show_a_folder_that_is_not_a_delta_table(lakehouse: Runner, root: Path) -> None:
    (root / "gold" / "debris").mkdir(parents=True)
    result = lakehouse("show", "gold.debris")
    assert result.code == 1, str(result)
    assert f"{root / 'gold' / 'debris'} is not a Delta table" in result.stderr


def test_show_an_empty_table(lakehouse: Runner, root: Path) -> None:
    write_table(root, "gold.empty", pa.table({"a": pa.array([], pa.int64())}))
    result = lakehouse("show", "gold.empty")
    assert result.code == 0, str(result)
    assert result.stdout.splitlines()[:2] == ["a", "-"]
    assert "0 of 0 rows" in result.stdout


def test_show_a_table_whose_data_file_is_gone(lakehouse: Runner, root: Path) -> None:
    path = write_table(root, "gold.damaged", {"a": [1, 2]})
    for data_file in path.glob("*.parquet"):
        data_file.unlink()
    result = lakehouse("show", "gold.damaged")
    assert result.code == 1, str(result)
    assert f"Cannot read table gold.damaged at {path}" in result.stderr
    assert "lakehouse reset gold.damaged" in result.stderr
    assert "Traceback" not in result.stderr
