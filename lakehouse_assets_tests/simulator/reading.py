"""An independent reader of landed files: parses them with json and csv, not the simulator.

The tests compare what the simulator says it landed with what this reader finds, so it must
not import the simulator's own formatting or classification.
"""

from __future__ import annotations

import csv
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from lakehouse_assets.ingestion.files import is_data_file

KEYS = {"device_id", "mrn", "time", "heartrate"}


def read_patients(path: Path) -> dict[int, str]:
    """mrn -> name from a patients CSV, checking its header."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        assert next(reader) == ["mrn", "name"]
        return {int(mrn): name for mrn, name in reader}


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def classify(line: str, known_mrns: set[int] | dict[int, str]) -> str:
    """The kind of one landed line, by the silver layer's rules."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return "malformed"
    if not isinstance(record, dict) or set(record) != KEYS:
        return "unexpected shape"  # the simulator never makes these: tests fail on it
    device_id, mrn, time, heartrate = (record[k] for k in ("device_id", "mrn", "time",
                                                            "heartrate"))
    if not (isinstance(device_id, int) and not isinstance(device_id, bool)
            and isinstance(mrn, int) and not isinstance(mrn, bool)
            and is_number(time) and is_number(heartrate)):
        return "wrong_type"
    if heartrate <= 0:
        return "non_positive_heartrate"
    if mrn not in known_mrns:
        return "unknown_patient"
    return "good"


def lines_of(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), f"{path} does not end with a newline"
    return text[:-1].split("\n")


def count_kinds(paths: Iterable[Path], known_mrns: set[int] | dict[int, str]) -> Counter[str]:
    return Counter(classify(line, known_mrns) for path in paths for line in lines_of(path))


def parsed_records(path: Path) -> list[dict[str, object]]:
    """The JSON objects of a file's parseable lines."""
    records = []
    for line in lines_of(path):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return records


def files_seen_while(land: Callable[[], object], folder: Path,
                     is_whole: Callable[[bytes], bool]) -> tuple[Counter[str], list[str]]:
    """Run ``land`` while another thread reads every data file of ``folder`` over and over:
    how often it read each file, and the files it once found not whole."""
    done = threading.Event()
    seen: Counter[str] = Counter()
    partial: list[str] = []

    def look() -> None:
        for name in os.listdir(folder) if folder.is_dir() else ():
            if is_data_file(name):
                seen[name] += 1
                if not is_whole((folder / name).read_bytes()):
                    partial.append(name)

    def watch() -> None:
        while not done.is_set():
            look()
            time.sleep(0)  # let the lander run: on a loaded machine a spinning reader can starve it
        look()  # and once more after: a reader scheduled late still reads every file once

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        land()
    finally:
        done.set()
        watcher.join()
    return seen, partial
