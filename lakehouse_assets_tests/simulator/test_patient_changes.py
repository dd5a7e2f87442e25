"""The patient changes feed: its lines, numbering, late arrivals, determinism and whole files.

Files are read back with json, not the simulator's own formatting; a change's "own" file (the
one its seq belongs to) is worked out from ``changes_per_file`` alone.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.ingestion.files import is_data_file
from lakehouse_assets.simulator import LandingStateError, land, land_patient_changes
from lakehouse_assets_tests.simulator.reading import files_seen_while, lines_of, read_patients

CHANGES_PER_FILE = 20


def change_files(landing: Path) -> list[Path]:
    return sorted(p for p in (landing / "patient_changes").iterdir() if is_data_file(p.name))


def changes_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines_of(path)]


def own_file(seq: int, changes_per_file: int = CHANGES_PER_FILE) -> int:
    """The file a change's seq belongs to: file k holds seqs (k-1)*n+1 .. k*n."""
    return (seq - 1) // changes_per_file + 1


def test_every_line_is_one_change_with_exactly_mrn_name_op_seq(landing: Path) -> None:
    result = land_patient_changes(landing, files=5, seed=3)
    ops: Counter[str] = Counter()
    for path in result.paths:
        for change in changes_of(path):
            assert list(change) == ["mrn", "name", "op", "seq"]
            assert type(change["mrn"]) is int and type(change["seq"]) is int
            assert change["op"] in ("UPSERT", "DELETE")
            if change["op"] == "UPSERT":
                assert isinstance(change["name"], str) and change["name"]
            else:
                assert change["name"] is None
            ops[change["op"]] += 1
    assert (result.upserts, result.deletes) == (ops["UPSERT"], ops["DELETE"])
    assert result.changes == sum(len(lines_of(p)) for p in result.paths)
    assert result.folder == landing / "patient_changes"


def test_numbering_continues_after_the_files_already_there(landing: Path) -> None:
    first = land_patient_changes(landing, files=2, seed=3)
    second = land_patient_changes(landing, files=3, seed=3)
    assert [p.name for p in first.paths] == ["patient_changes-000001.json", "patient_changes-000002.json"]
    assert [p.name for p in second.paths] == [f"patient_changes-00000{i}.json" for i in (3, 4, 5)]
    assert change_files(landing) == [*first.paths, *second.paths]
    assert land_patient_changes(landing, files=0, seed=3).paths == ()
    # Nothing beside the data: the landers' lock is under landing/_locks, which is no source.
    assert {p.name for p in (landing / "patient_changes").iterdir()} == {p.name for p in change_files(landing)}


def test_seq_is_unique_and_late_changes_arrive_in_later_files_than_their_own(landing: Path) -> None:
    result = land_patient_changes(landing, files=10, seed=4)
    seen_before: list[int] = []  # every seq in the files before the one being read
    late = 0
    for index, path in enumerate(result.paths, start=1):
        seqs = [change["seq"] for change in changes_of(path)]
        for seq in seqs:
            assert own_file(seq) <= index, f"seq {seq} landed early, in file {index}"
            if own_file(seq) < index:
                late += 1
                # A reader can tell: a higher seq has already landed in an earlier file.
                assert seen_before and seq < max(seen_before), f"seq {seq} in file {index}"
        seen_before.extend(seqs)
    assert len(seen_before) == len(set(seen_before)), "a seq landed twice"
    # 0.2 of each file's 20 changes are late: 4 per file, 1 to 3 files late; the latest
    # files' late changes are still in flight.
    assert 4 * 7 <= late <= 4 * 9
    missing = set(range(1, 10 * CHANGES_PER_FILE + 1)) - set(seen_before)
    assert missing and all(own_file(seq) > 7 for seq in missing)
    # Once later files land, every one of those arrives.
    more = land_patient_changes(landing, files=3, seed=4)
    assert missing <= {change["seq"] for path in more.paths for change in changes_of(path)}


def test_lines_within_a_file_are_not_in_seq_order(landing: Path) -> None:
    result = land_patient_changes(landing, files=3, seed=4, late_share=0.0)
    shuffled = [path.name for path in result.paths
                if [c["seq"] for c in changes_of(path)] != sorted(c["seq"] for c in changes_of(path))]
    assert shuffled
    # With no late changes, every file holds exactly its own seqs.
    for index, path in enumerate(result.paths, start=1):
        assert sorted(c["seq"] for c in changes_of(path)) == list(
            range((index - 1) * CHANGES_PER_FILE + 1, index * CHANGES_PER_FILE + 1))


def test_same_seed_and_files_landed_so_far_give_byte_identical_files(tmp_path: Path) -> None:
    at_once = land_patient_changes(tmp_path / "a", files=6, seed=9)
    in_pieces = [*land_patient_changes(tmp_path / "b", files=2, seed=9).paths,
                 *land_patient_changes(tmp_path / "b", files=1, seed=9).paths,
                 *land_patient_changes(tmp_path / "b", files=3, seed=9).paths]
    assert [p.name for p in at_once.paths] == [p.name for p in in_pieces]
    for a, b in zip(at_once.paths, in_pieces, strict=True):
        assert a.read_bytes() == b.read_bytes()
    other = land_patient_changes(tmp_path / "c", files=1, seed=10)
    assert other.paths[0].read_bytes() != at_once.paths[0].read_bytes()


def test_about_one_change_in_eight_is_a_delete(landing: Path) -> None:
    result = land_patient_changes(landing, files=40, seed=5)
    ops = Counter(change["op"] for path in result.paths for change in changes_of(path))
    total = ops["UPSERT"] + ops["DELETE"]
    assert 0.08 <= ops["DELETE"] / total <= 0.17, ops
    assert result.deletes == ops["DELETE"]
    # Upserts reuse a short list of names, so the same name comes back.
    names = Counter(c["name"] for path in result.paths for c in changes_of(path) if c["op"] == "UPSERT")
    assert max(names.values()) > 1


def test_every_mrn_is_a_patient_of_the_patients_csv(landing: Path) -> None:
    recordings = land(landing, files=1, records_per_file=10, seed=6, patient_count=300, device_count=10)
    patients = read_patients(recordings.patients_path)
    result = land_patient_changes(landing, files=20, seed=6, patient_count=300, device_count=10)
    mrns = {change["mrn"] for path in result.paths for change in changes_of(path)}
    assert mrns <= set(patients)
    # The changes fall on a few patients, so each history has several versions.
    assert 10 < len(mrns) <= 25
    per_patient = [sum(c["mrn"] == m for p in result.paths for c in changes_of(p)) for m in mrns]
    assert max(per_patient) >= 10


def test_a_folder_holding_another_feed_or_data_set_is_refused(landing: Path) -> None:
    land_patient_changes(landing, files=2, seed=1)
    others: list[dict[str, Any]] = [{"seed": 2}, {"seed": 1, "changes_per_file": 10}, {"seed": 1, "late_share": 0.5}]
    for other in others:
        with pytest.raises(LandingStateError, match="patient_changes-000002.json"):
            land_patient_changes(landing, files=1, **other)
    assert len(change_files(landing)) == 2
    land(landing, files=1, records_per_file=10, seed=1)
    with pytest.raises(LandingStateError, match="patients CSV"):
        land_patient_changes(landing, files=1, seed=1, patient_count=999)
    assert len(change_files(landing)) == 2


@pytest.mark.parametrize("bad", [{"files": -1}, {"files": 1, "changes_per_file": 0},
                                 {"files": 1, "late_share": 1.5}, {"files": 1, "late_share": float("nan")}])
def test_bad_settings_are_refused(landing: Path, bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        land_patient_changes(landing, **bad)


def test_readers_only_ever_see_whole_files(landing: Path) -> None:
    def whole(data: bytes) -> bool:
        try:
            return data.endswith(b"\n") and all(json.loads(line) for line in data.splitlines())
        except json.JSONDecodeError:
            return False

    seen, partial = files_seen_while(
        lambda: land_patient_changes(landing, files=30, changes_per_file=1_000, seed=8), landing / "patient_changes",
        whole)
    assert seen and not partial



def test_concurrent_landers_take_turns(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    results = []

    def one() -> None:
        results.append(land_patient_changes(landing, files=5, seed=8))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(p.name for r in results for p in r.paths) == [p.name for p in change_files(landing)]
    assert len(change_files(landing)) == 20
    alone = land_patient_changes(tmp_path / "alone", files=20, seed=8)
    assert [p.read_bytes() for p in change_files(landing)] == [p.read_bytes() for p in alone.paths]
