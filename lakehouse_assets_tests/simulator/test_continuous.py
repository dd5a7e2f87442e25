from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.simulator import LandedFile, land, land_continuously, read_manifest


def test_stops_after_max_files_without_a_last_wait(landing: Path) -> None:
    started = time.monotonic()
    result = land_continuously(landing, interval_seconds=0.2, max_files=3,
                               records_per_file=10, seed=1)
    elapsed = time.monotonic() - started
    assert [f.index for f in result.files] == [1, 2, 3]
    assert 0.4 <= elapsed < 5  # two waits between three files, none after the last
    assert result.patients_written


def test_continues_the_numbering_of_earlier_landings(landing: Path) -> None:
    land(landing, files=2, records_per_file=10, seed=1)
    result = land_continuously(landing, interval_seconds=0, max_files=2,
                               records_per_file=10, seed=1)
    assert [f.index for f in result.files] == [3, 4]
    assert not result.patients_written
    manifest = read_manifest(landing)
    assert manifest is not None and manifest.last_index == 4


def test_stop_event_ends_the_current_wait(landing: Path) -> None:
    stop = threading.Event()
    seen: list[LandedFile] = []

    def on_landed(landed: LandedFile) -> None:
        seen.append(landed)
        stop.set()

    started = time.monotonic()
    result = land_continuously(landing, interval_seconds=60, stop_event=stop,
                               on_landed=on_landed, records_per_file=10, seed=1)
    assert time.monotonic() - started < 10
    assert result.files == tuple(seen) and len(seen) == 1


def test_stops_when_told_from_another_thread(landing: Path) -> None:
    stop = threading.Event()
    landed: list[LandedFile] = []
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(land_continuously(
        landing, interval_seconds=0.02, stop_event=stop, on_landed=landed.append,
        records_per_file=10, seed=1)))
    worker.start()
    deadline = time.monotonic() + 10
    while len(landed) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert len(landed) >= 3
    result = outcome[0]
    assert result.files == tuple(landed)  # type: ignore[attr-defined]
    manifest = read_manifest(landing)
    assert manifest is not None and manifest.files == tuple(landed)


def test_a_set_stop_event_lands_nothing(landing: Path) -> None:
    stop = threading.Event()
    stop.set()
    result = land_continuously(landing, interval_seconds=0, stop_event=stop, seed=1)
    assert result.files == ()


def test_stops_at_the_end_of_the_year(landing: Path) -> None:
    result = land_continuously(landing, interval_seconds=0, records_per_file=10, seed=1,
                               files_per_year=5)
    assert [f.index for f in result.files] == [1, 2, 3, 4, 5]
    assert result.files[-1].end_time == 1609459200


@pytest.mark.parametrize("options", [{"interval_seconds": -1},
                                     {"interval_seconds": float("inf")},
                                     {"interval_seconds": 0, "max_files": -1}])
def test_invalid_arguments_are_refused(landing: Path, options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        land_continuously(landing, **options)  # type: ignore[arg-type]
