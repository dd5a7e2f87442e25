"""``lakehouse land``: what lands where, numbering across runs, and stopping a continuous landing.

Landed files are checked by reading the folder and the simulator's manifest, not the
command's own report.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pty
import select
import signal
import subprocess
from pathlib import Path

import pytest

from lakehouse_assets.simulator import read_manifest
from lakehouse_assets_tests.cli.helpers import TIMEOUT_SECONDS, Runner, cli_env, command


def recordings(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "landing" / "recordings").glob("recordings-*.json"))


def test_land_with_defaults_lands_five_files_and_the_patients(lakehouse: Runner, root: Path) -> None:
    result = lakehouse("land")
    assert result.code == 0, str(result)
    assert recordings(root) == [f"recordings-00000{i}.json" for i in range(1, 6)]
    assert (root / "landing" / "patients" / "patients.csv").is_file()
    for name in recordings(root):
        lines = (root / "landing" / "recordings" / name).read_text().splitlines()
        assert len(lines) == 1000
    manifest = read_manifest(root / "landing")
    assert manifest is not None
    counts = manifest.counts
    assert counts.total == 5000 and counts.bad == 50  # --bad-rate 0.01 by default
    # The report states the same counts, per kind, with the folder it landed in.
    assert "Landed 5 files" in result.stdout and str(root / "landing" / "recordings") in result.stdout
    assert f"{counts.bad:,} bad" in result.stdout
    for kind in ("malformed", "wrong_type", "non_positive_heartrate", "unknown_patient"):
        assert f"{kind} {getattr(counts, kind)}" in result.stdout
    assert "wrote the patients CSV" in result.stdout


def test_default_files_are_a_day_apart_so_gold_has_several_days(lakehouse: Runner) -> None:
    report = json.loads(lakehouse("land", "--files", "3", "--json").stdout)
    starts = [dt.datetime.fromisoformat(f["start_time"]) for f in report["files"]]
    assert [s.date() for s in starts] == [dt.date(2020, 1, 1), dt.date(2020, 1, 2), dt.date(2020, 1, 3)]
    assert report["files_per_year"] == 365


@pytest.mark.parametrize("second_via", ["script", "module"])
def test_landing_twice_continues_numbering(lakehouse: Runner, lakehouse_process: Runner, root: Path,
                                           second_via: str) -> None:
    first = lakehouse("land", "--files", "2", "--records", "10", "--json")
    # The second landing in a process of its own, through each entry point: the numbering
    # continues from what is on disk, not from anything the first run kept in memory.
    second = lakehouse_process("land", "--files", "2", "--records", "10", "--json", via=second_via)
    assert first.code == second.code == 0, f"{first}\n{second}"
    assert [f["index"] for f in json.loads(first.stdout)["files"]] == [1, 2]
    report = json.loads(second.stdout)
    assert [f["index"] for f in report["files"]] == [3, 4]
    assert report["patients_written"] is False and report["next_index"] == 5
    assert recordings(root) == [f"recordings-00000{i}.json" for i in range(1, 5)]


def test_if_empty_lands_a_first_batch_once(lakehouse: Runner, root: Path) -> None:
    # What make run does on every start: a fresh lakehouse gets its first batch, a used one none.
    first = lakehouse("land", "--files", "2", "--records", "10", "--if-empty")
    again = lakehouse("land", "--files", "2", "--records", "10", "--if-empty")
    assert first.code == again.code == 0, f"{first}\n{again}"
    assert "nothing landed (--if-empty)" in again.stdout
    assert recordings(root) == ["recordings-000001.json", "recordings-000002.json"]


def test_land_json_counts_match_the_manifest(lakehouse: Runner, root: Path) -> None:
    result = lakehouse("land", "--files", "4", "--records", "250", "--bad-rate", "0.2", "--seed", "3",
                       "--json")
    assert result.code == 0, str(result)
    report = json.loads(result.stdout)
    manifest = read_manifest(root / "landing")
    assert manifest is not None and manifest.dataset.seed == 3
    assert report["counts"] == {**manifest.counts.as_dict(), "bad": manifest.counts.bad}
    assert report["counts"]["bad"] == 200


def test_without_seed_or_files_per_year_the_folders_data_set_continues(lakehouse: Runner, root: Path) -> None:
    assert lakehouse("land", "--files", "1", "--records", "10", "--seed", "7",
                     "--files-per-year", "100").code == 0
    result = lakehouse("land", "--files", "1", "--records", "10")
    assert result.code == 0, str(result)
    manifest = read_manifest(root / "landing")
    assert manifest is not None
    assert (manifest.dataset.seed, manifest.dataset.files_per_year) == (7, 100)
    assert [f.index for f in manifest.files] == [1, 2]


def test_another_data_set_is_refused_with_what_to_do(lakehouse: Runner, root: Path) -> None:
    assert lakehouse("land", "--files", "1", "--records", "10").code == 0
    result = lakehouse("land", "--files", "1", "--records", "10", "--seed", "9")
    assert result.code == 1, str(result)
    assert str(root / "landing") in result.stderr
    assert "leave out --seed" in result.stderr and "--root" in result.stderr
    assert "Traceback" not in result.stderr
    assert recordings(root) == ["recordings-000001.json"]


def test_landing_past_the_end_of_the_year_lands_nothing_and_says_what_is_left(
        lakehouse: Runner, root: Path) -> None:
    assert lakehouse("land", "--files", "2", "--records", "10", "--files-per-year", "3").code == 0
    result = lakehouse("land", "--files", "2", "--records", "10")
    assert result.code == 1, str(result)
    assert "1 files are left: lakehouse land --files 1" in result.stderr
    assert recordings(root) == ["recordings-000001.json", "recordings-000002.json"]


def test_no_progress_bar_without_a_terminal(lakehouse: Runner, root: Path) -> None:
    result = lakehouse("land", "--files", "40", "--records", "5")
    assert result.code == 0, str(result)
    assert result.stderr == ""
    assert len(recordings(root)) == 40


def test_progress_bar_on_a_terminal(root: Path) -> None:
    # stderr on a pseudo-terminal, as in an interactive shell.
    leader, follower = pty.openpty()
    process = subprocess.Popen([*command(), "land", "--files", "40", "--records", "5"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
                               env=cli_env(root))
    os.close(follower)
    terminal = _read_until_closed(leader)
    stdout, _ = process.communicate(timeout=TIMEOUT_SECONDS)
    assert process.returncode == 0, terminal
    assert "Landing" in terminal and "/40" in terminal
    assert b"Landed 40 files" in stdout
    assert len(recordings(root)) == 40


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_continuous_landing_stops_cleanly_on_a_signal_with_a_summary(
        root: Path, stop_signal: signal.Signals) -> None:
    process = subprocess.Popen(
        [*command(), "land", "--continuous", "--interval", "0.2", "--records", "20"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=cli_env(root))
    assert process.stdout is not None
    first = process.stdout.readline()  # a file has landed, so the handlers are in place
    assert first.startswith("recordings-000001.json"), first
    process.send_signal(stop_signal)
    rest, stderr = process.communicate(timeout=TIMEOUT_SECONDS)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    landed = recordings(root)
    per_file_lines = [first] + [line for line in rest.splitlines() if line.startswith("recordings-")]
    assert len(per_file_lines) == len(landed) >= 1
    assert f"Stopped by {stop_signal.name}." in rest
    expected = "1 file into" if len(landed) == 1 else f"{len(landed)} files into"
    assert f"Landed {expected}" in rest
    assert f"next file: number {len(landed) + 1} of 365" in rest


def test_continuous_landing_stops_after_files(lakehouse: Runner, root: Path) -> None:
    result = lakehouse("land", "--continuous", "--interval", "0", "--files", "3", "--records", "10")
    assert result.code == 0, str(result)
    assert len(recordings(root)) == 3
    assert "Landed 3 files" in result.stdout


def test_continuous_landing_stops_when_the_year_is_complete(lakehouse: Runner, root: Path) -> None:
    result = lakehouse("land", "--continuous", "--interval", "0", "--files-per-year", "2",
                       "--records", "10", "--json")
    assert result.code == 0, str(result)
    report = json.loads(result.stdout)
    assert report["stopped_by"] == "complete"
    assert [f["index"] for f in report["files"]] == [1, 2]
    assert len(recordings(root)) == 2


def patient_changes(root: Path) -> dict[str, list[dict[str, object]]]:
    """The changes in each landed patient changes file, by file name."""
    folder = root / "landing" / "patient_changes"
    return {p.name: [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted(folder.glob("patient_changes-*.json"))}


def test_land_with_changes_also_lands_patient_changes_naming_the_patients(lakehouse: Runner, root: Path) -> None:
    result = lakehouse("land", "--files", "1", "--records", "10", "--changes", "2")
    assert result.code == 0, str(result)
    landed = patient_changes(root)
    assert list(landed) == ["patient_changes-000001.json", "patient_changes-000002.json"]
    changes = [change for file in landed.values() for change in file]
    csv_lines = (root / "landing" / "patients" / "patients.csv").read_text().splitlines()[1:]
    assert {change["mrn"] for change in changes} <= {int(line.split(",")[0]) for line in csv_lines}
    deletes = sum(change["op"] == "DELETE" for change in changes)
    assert (f"Landed 2 files of patient changes into {root / 'landing' / 'patient_changes'}: "
            "patient_changes-000001.json .. patient_changes-000002.json") in result.stdout
    assert f"  changes: {len(changes)} ({len(changes) - deletes} upserts, {deletes} deletes)" in result.stdout
    # Numbering continues, and --json says the same.
    report = json.loads(lakehouse("land", "--files", "1", "--records", "10", "--changes", "1", "--json").stdout)
    third = patient_changes(root)["patient_changes-000003.json"]
    assert report["patient_changes"] == {
        "dir": str(root / "landing" / "patient_changes"),
        "files": [str(root / "landing" / "patient_changes" / "patient_changes-000003.json")],
        "counts": {"upsert": sum(c["op"] == "UPSERT" for c in third),
                   "delete": sum(c["op"] == "DELETE" for c in third), "total": len(third)},
    }


def test_land_without_changes_lands_and_reports_none(lakehouse: Runner, root: Path) -> None:
    result = lakehouse("land", "--files", "1", "--records", "10", "--json")
    assert result.code == 0, str(result)
    assert "patient_changes" not in json.loads(result.stdout)
    assert not (root / "landing" / "patient_changes").exists()


def test_continuous_landing_lands_the_changes_first(lakehouse: Runner, root: Path) -> None:
    result = lakehouse("land", "--continuous", "--interval", "0", "--files", "2", "--records", "10",
                       "--changes", "1")
    assert result.code == 0, str(result)
    assert list(patient_changes(root)) == ["patient_changes-000001.json"]
    assert len(recordings(root)) == 2
    assert "Landed 1 file of patient changes" in result.stdout

def _read_until_closed(fd: int) -> str:
    chunks = []
    while True:
        ready, _, _ = select.select([fd], [], [], TIMEOUT_SECONDS)
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other side closed (EIO on Linux)
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")
