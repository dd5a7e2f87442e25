from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.ingestion.files import is_data_file
from lakehouse_assets.simulator import (
    DatasetExhaustedError,
    LandingStateError,
    land,
    next_file_index,
    read_manifest,
)
from lakehouse_assets_tests.simulator.reading import (
    count_kinds,
    files_seen_while,
    lines_of,
    parsed_records,
    read_patients,
)


def data_files(landing: Path) -> list[Path]:
    return sorted(p for p in (landing / "recordings").iterdir() if is_data_file(p.name))


def test_lands_numbered_files_and_the_patients_csv(landing: Path) -> None:
    result = land(landing, files=3, records_per_file=100, seed=1)
    assert [p.name for p in result.paths] == [
        "recordings-000001.json", "recordings-000002.json", "recordings-000003.json"]
    assert data_files(landing) == list(result.paths)
    assert result.patients_written
    assert result.patients_path == landing / "patients" / "patients.csv"
    assert len(read_patients(result.patients_path)) == 1000
    assert result.counts.total == 300
    # Everything else the lander keeps there is invisible to ingestion.
    others = {p.name for p in (landing / "recordings").iterdir()} - {p.name for p in result.paths}
    assert others and not any(is_data_file(name) for name in others)


def test_same_seed_lands_byte_identical_files(tmp_path: Path) -> None:
    first = land(tmp_path / "a", files=3, records_per_file=200, bad_rate=0.1, seed=9)
    second = land(tmp_path / "b", files=3, records_per_file=200, bad_rate=0.1, seed=9)
    for a, b in zip(first.paths, second.paths, strict=True):
        assert a.read_bytes() == b.read_bytes()
    assert first.patients_path.read_bytes() == second.patients_path.read_bytes()


def test_different_seeds_land_different_files(tmp_path: Path) -> None:
    first = land(tmp_path / "a", files=1, records_per_file=200, seed=9)
    second = land(tmp_path / "b", files=1, records_per_file=200, seed=10)
    assert first.paths[0].read_bytes() != second.paths[0].read_bytes()
    assert first.patients_path.read_bytes() != second.patients_path.read_bytes()


def test_bad_rate_zero_lands_only_valid_records_of_known_patients(landing: Path) -> None:
    result = land(landing, files=4, records_per_file=500, seed=2)
    patients = read_patients(result.patients_path)
    assert count_kinds(result.paths, patients) == {"good": 2000}
    assert result.counts.good == result.counts.total == 2000


@pytest.mark.parametrize("bad_rate", [0.003, 0.05, 0.5, 1.0])
def test_reported_counts_are_what_the_files_hold(landing: Path, bad_rate: float) -> None:
    result = land(landing, files=5, records_per_file=400, bad_rate=bad_rate, seed=3)
    patients = read_patients(result.patients_path)
    for landed in result.files:
        found = count_kinds([landed.path], patients)
        reported = {k: v for k, v in landed.counts.as_dict().items() if k != "total" and v}
        assert found == reported, landed.path.name
    total = count_kinds(result.paths, patients)
    assert sum(total.values()) == result.counts.total == 2000
    assert result.counts.bad == int(bad_rate * 2000)
    assert total["good"] == result.counts.good


def test_files_follow_each_other_in_time(landing: Path) -> None:
    result = land(landing, files=6, records_per_file=300, bad_rate=0.05, seed=4,
                  files_per_year=366)
    previous_last = float("-inf")
    for landed in result.files:
        times = [r["time"] for r in parsed_records(landed.path)
                 if isinstance(r["time"], float)]
        assert times == sorted(times)
        assert landed.start_time <= times[0] and times[-1] < landed.end_time
        assert previous_last < times[0]
        previous_last = times[-1]
    assert 1577836800 <= result.files[0].start_time and result.files[-1].end_time <= 1609459200


def test_landing_continues_numbering_across_calls(landing: Path) -> None:
    first = land(landing, files=2, records_per_file=50, seed=5)
    second = land(landing, files=3, records_per_file=80, bad_rate=0.1, seed=5)
    assert [f.index for f in first.files] == [1, 2]
    assert [f.index for f in second.files] == [3, 4, 5]
    assert not second.patients_written
    assert next_file_index(landing) == 6
    manifest = read_manifest(landing)
    assert manifest is not None
    assert manifest.files == first.files + second.files
    assert manifest.counts == first.counts + second.counts


def test_the_patients_csv_is_written_once(landing: Path) -> None:
    first = land(landing, files=1, records_per_file=10, seed=5)
    before = first.patients_path.stat().st_mtime_ns
    second = land(landing, files=1, records_per_file=10, seed=5)
    assert first.patients_written and not second.patients_written
    assert second.patients_path.stat().st_mtime_ns == before


def test_numbering_survives_losing_the_manifest(landing: Path) -> None:
    land(landing, files=2, records_per_file=10, seed=5)
    (landing / "recordings" / "_manifest.json").unlink()
    assert [f.index for f in land(landing, files=1, records_per_file=10, seed=5).files] == [3]


def test_numbering_survives_ingestion_moving_files_away(landing: Path, tmp_path: Path) -> None:
    land(landing, files=2, records_per_file=10, seed=5)
    archive = tmp_path / "archive"
    archive.mkdir()
    for path in data_files(landing):
        shutil.move(path, archive / path.name)
    assert next_file_index(landing) == 3
    assert [f.index for f in land(landing, files=1, records_per_file=10, seed=5).files] == [3]


def test_start_index_relands_identical_bytes(landing: Path) -> None:
    result = land(landing, files=3, records_per_file=100, bad_rate=0.1, seed=6)
    original = result.paths[1].read_bytes()
    result.paths[1].unlink()
    again = land(landing, files=1, records_per_file=100, bad_rate=0.1, seed=6, start_index=2)
    assert again.paths == (result.paths[1],)
    assert again.paths[0].read_bytes() == original
    assert next_file_index(landing) == 4
    manifest = read_manifest(landing)
    assert manifest is not None and [f.index for f in manifest.files] == [1, 2, 3]


def test_landing_leaves_no_temporary_files(landing: Path) -> None:
    land(landing, files=40, records_per_file=20, seed=7)
    names = [p.name for folder in (landing / "recordings", landing / "patients")
             for p in folder.iterdir()]
    assert not [n for n in names if n.endswith((".tmp", ".partial"))]
    assert not [n for n in names if n.startswith(".")]
    # The landers' lock lies beside the sources, in a folder neither sources nor ingestion read.
    assert sorted(p.name for p in landing.iterdir()) == ["_locks", "patients", "recordings"]


def test_a_failed_write_leaves_neither_partial_nor_temporary_files(
        landing: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    land(landing, files=1, records_per_file=20, seed=7)
    renames = 0
    real_replace = os.replace

    def replace_then_fail(src: str | Path, dst: str | Path) -> None:
        nonlocal renames
        renames += 1
        if renames == 3:
            raise OSError("disk gone")
        real_replace(src, dst)

    monkeypatch.setattr("lakehouse_assets.simulator._atomic.os.replace", replace_then_fail)
    with pytest.raises(OSError, match="disk gone"):
        land(landing, files=5, records_per_file=20, seed=7)
    monkeypatch.undo()
    names = sorted(p.name for p in (landing / "recordings").iterdir())
    assert not [n for n in names if n.endswith(".tmp")]
    # The two files renamed before the failure are whole; the next landing continues after them.
    assert [p.name for p in data_files(landing)] == [f"recordings-00000{i}.json" for i in (1, 2, 3)]
    assert all(len(lines_of(p)) == 20 for p in data_files(landing))
    assert [f.index for f in land(landing, files=1, records_per_file=20, seed=7).files] == [4]


def test_stale_temporaries_of_a_dead_lander_are_removed(landing: Path) -> None:
    land(landing, files=1, records_per_file=10, seed=7)
    stale = landing / "recordings" / ".recordings-000002.json.99999.tmp"
    stale.write_text('{"device_id"')
    land(landing, files=1, records_per_file=10, seed=7)
    assert not stale.exists()


def test_readers_only_ever_see_whole_files(landing: Path) -> None:
    records_per_file = 2_000
    seen, partial = files_seen_while(
        lambda: land(landing, files=30, records_per_file=records_per_file, seed=8), landing / "recordings",
        lambda data: data.count(b"\n") == records_per_file and data.endswith(b"\n"))
    assert seen and not partial



def test_concurrent_landers_take_turns(landing: Path) -> None:
    results = []

    def one() -> None:
        results.append(land(landing, files=5, records_per_file=10, seed=8))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    indexes = sorted(f.index for r in results for f in r.files)
    assert indexes == list(range(1, 21))
    manifest = read_manifest(landing)
    assert manifest is not None and manifest.last_index == 20 and len(manifest.files) == 20


def test_another_seed_is_refused_in_the_same_folder(landing: Path) -> None:
    land(landing, files=1, records_per_file=10, seed=1)
    with pytest.raises(LandingStateError, match="seed=1"):
        land(landing, files=1, records_per_file=10, seed=2)
    assert len(data_files(landing)) == 1


def test_an_edited_patients_csv_is_refused(landing: Path) -> None:
    result = land(landing, files=1, records_per_file=10, seed=1)
    lines = result.patients_path.read_text().splitlines()
    result.patients_path.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(LandingStateError, match="patients.csv"):
        land(landing, files=1, records_per_file=10, seed=1)


def test_landing_past_the_end_of_the_year_lands_nothing(landing: Path) -> None:
    land(landing, files=3, records_per_file=10, seed=1, files_per_year=4)
    with pytest.raises(DatasetExhaustedError):
        land(landing, files=2, records_per_file=10, seed=1, files_per_year=4)
    assert len(data_files(landing)) == 3
    last = land(landing, files=1, records_per_file=10, seed=1, files_per_year=4)
    assert last.files[0].end_time == 1609459200


@pytest.mark.parametrize("options", [{"files": -1}, {"files": 1, "start_index": 0},
                                     {"files": 1, "bad_rate": 2.0}])
def test_invalid_arguments_are_refused(landing: Path, options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        land(landing, records_per_file=10, **options)  # type: ignore[arg-type]


def test_zero_files_only_writes_the_patients_csv(landing: Path) -> None:
    result = land(landing, files=0, seed=1)
    assert result.files == () and result.patients_path.exists()
    assert read_manifest(landing) is None


def test_bad_kinds_can_be_chosen_by_name(landing: Path) -> None:
    result = land(landing, files=2, records_per_file=100, bad_rate=0.1, seed=1,
                  bad_kinds=["unknown_patient"])
    assert result.counts.unknown_patient == result.counts.bad == 20
    with pytest.raises(ConfigurationError, match="not a string"):
        land(landing, files=1, records_per_file=100, bad_rate=0.1, seed=1,
             bad_kinds="malformed")


def test_groups_landed_before_a_failure_are_in_the_manifest(
        landing: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakehouse_assets.simulator import dataset

    real_file = dataset.Dataset.file

    def fail_at_40(self: dataset.Dataset, index: int) -> dataset.GeneratedFile:
        if index == 40:
            raise RuntimeError("generator broke")
        return real_file(self, index)

    monkeypatch.setattr(dataset.Dataset, "file", fail_at_40)
    with pytest.raises(RuntimeError, match="generator broke"):
        land(landing, files=50, records_per_file=10, seed=1)
    manifest = read_manifest(landing)
    # Files are written in groups of 32: the first group landed whole, the second not at all.
    assert manifest is not None and [f.index for f in manifest.files] == list(range(1, 33))
    assert [p.name for p in data_files(landing)][-1] == "recordings-000032.json"
