from __future__ import annotations

import json
from collections import Counter

import pytest

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.simulator import (
    YEAR_END,
    YEAR_START,
    Dataset,
    RecordKind,
    SimulatorConfig,
    file_time_range,
)

SMALL = SimulatorConfig(seed=7, records_per_file=500)


def records(content: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in content.decode("utf-8").splitlines()]


def test_same_seed_gives_the_same_bytes_whatever_the_order_of_calls() -> None:
    one, two = Dataset(SMALL), Dataset(SMALL)
    later_first = [two.file(3).content, two.file(1).content]
    assert [one.file(1).content, one.file(3).content] == later_first[::-1]


def test_different_seeds_give_different_files() -> None:
    other = SimulatorConfig(seed=8, records_per_file=500)
    assert Dataset(SMALL).file(1).content != Dataset(other).file(1).content
    assert Dataset(SMALL).patients_csv() != Dataset(other).patients_csv()


def test_lines_have_exactly_the_course_keys_and_types() -> None:
    for record in records(Dataset(SMALL).file(2).content):
        assert list(record) == ["device_id", "mrn", "time", "heartrate"]
        assert type(record["device_id"]) is int
        assert type(record["mrn"]) is int
        assert type(record["time"]) is float
        assert type(record["heartrate"]) is float


def test_records_are_in_time_order_within_their_slice_of_the_year() -> None:
    dataset = Dataset(SimulatorConfig(seed=7, records_per_file=500, files_per_year=12))
    previous_end = YEAR_START
    for index in range(1, 13):
        generated = dataset.file(index)
        times = [r["time"] for r in records(generated.content)]
        assert times == sorted(times)
        assert generated.start_time == previous_end
        assert generated.start_time <= times[0] and times[-1] < generated.end_time
        previous_end = generated.end_time
    assert previous_end == YEAR_END


@pytest.mark.parametrize("files_per_year", [1, 7, 12, 366, 1000, 8784])
def test_slices_tile_the_year_exactly(files_per_year: int) -> None:
    ranges = [file_time_range(i, files_per_year=files_per_year)
              for i in range(1, files_per_year + 1)]
    assert ranges[0][0] == YEAR_START and ranges[-1][1] == YEAR_END
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert all(start < end for start, end in ranges)


def test_default_files_are_hours_of_2020() -> None:
    assert file_time_range(1, files_per_year=SimulatorConfig().files_per_year) == (
        YEAR_START, YEAR_START + 3600)


def test_a_larger_sample_covers_about_1000_patients_on_about_50_devices() -> None:
    dataset = Dataset(SimulatorConfig(seed=21, records_per_file=5_000))
    sample = [r for i in range(1, 21) for r in records(dataset.file(i).content)]
    assert len(sample) == 100_000
    patients = Counter(r["mrn"] for r in sample)
    devices = {r["device_id"] for r in sample}
    assert 990 <= len(patients) <= 1000
    assert 45 <= len(devices) <= 50
    # Each mrn is always seen on the same device: patients wear their own device.
    device_of: dict[object, object] = {}
    assert all(device_of.setdefault(r["mrn"], r["device_id"]) == r["device_id"] for r in sample)


def test_heartrates_are_plausible() -> None:
    rates = [r["heartrate"] for r in records(Dataset(SMALL).file(1).content)]
    assert all(30 < rate < 200 for rate in rates)  # type: ignore[operator]
    mean = sum(rates) / len(rates)  # type: ignore[arg-type]
    assert 65 < mean < 90
    assert len(set(rates)) > len(rates) // 2  # noisy, not constant


def test_records_per_file_is_honoured() -> None:
    for count in (1, 10, 1234):
        generated = Dataset(SimulatorConfig(seed=1, records_per_file=count)).file(1)
        assert generated.content.count(b"\n") == count == generated.counts.total


def test_bad_records_replace_good_ones_and_leave_the_rest_unchanged() -> None:
    clean = Dataset(SMALL).file(4)
    dirty = Dataset(SimulatorConfig(seed=7, records_per_file=500, bad_rate=0.2)).file(4)
    clean_lines = clean.content.decode().splitlines()
    dirty_lines = dirty.content.decode().splitlines()
    assert len(clean_lines) == len(dirty_lines)
    for clean_line, dirty_line, kind in zip(clean_lines, dirty_lines, dirty.kinds, strict=True):
        assert (clean_line == dirty_line) == (kind is RecordKind.GOOD)


@pytest.mark.parametrize("index", [0, -1, 8785, True])
def test_file_indexes_outside_the_year_are_refused(index: int) -> None:
    with pytest.raises(ConfigurationError):
        Dataset(SMALL).file(index)
