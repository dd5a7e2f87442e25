"""Where things go in a landing folder, and which of its files are data.

    <landing_root>/
      patients/patients.csv            the PII lookup (mrn,name), written once
      recordings/recordings-000001.json  one JSON-lines file per slice of 2020, in order
      recordings/_manifest.json        what was landed, with per-kind counts
      recordings/.lander.lock          serializes landers (never data)

Ingestion treats names starting with ``_`` or ``.``, and names ending ``.tmp`` or ``.partial``,
as not data, so the manifest, the lock and files being written are never read as recordings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RECORDINGS_DIR = "recordings"
PATIENTS_DIR = "patients"
PATIENTS_FILE = "patients.csv"
MANIFEST_FILE = "_manifest.json"
LOCK_FILE = ".lander.lock"

_RECORDING_NAME = re.compile(r"recordings-(\d{6})\.json")
_TEMPORARY_NAME = re.compile(r"\..+\.\d+\.tmp")


def recording_file_name(index: int) -> str:
    """The name of recordings file ``index``: six digits, so names sort in landing order."""
    return f"recordings-{index:06d}.json"


def recording_file_index(name: str) -> int | None:
    """The index in a recordings file name, or None if ``name`` is not one."""
    match = _RECORDING_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def is_data_file_name(name: str) -> bool:
    """Whether ingestion reads a file of this name: the rule the lander's own files obey."""
    return not (name.startswith(("_", ".")) or name.endswith((".tmp", ".partial")))


def temporary_name(name: str, token: int) -> str:
    """The name a file is written under before it is renamed to ``name``: hidden (leading
    ``.``) and ending ``.tmp``, so ingestion skips it by either rule. ``token`` (the writer's
    pid) keeps two writers from sharing one temporary file."""
    return f".{name}.{token}.tmp"


def is_temporary_name(name: str) -> bool:
    """Whether ``name`` is one of :func:`temporary_name`'s."""
    return _TEMPORARY_NAME.fullmatch(name) is not None


@dataclass(frozen=True)
class LandingLayout:
    """The paths of one landing folder."""

    root: Path

    @property
    def recordings_dir(self) -> Path:
        return self.root / RECORDINGS_DIR

    @property
    def patients_dir(self) -> Path:
        return self.root / PATIENTS_DIR

    @property
    def patients_csv(self) -> Path:
        return self.patients_dir / PATIENTS_FILE

    @property
    def manifest(self) -> Path:
        return self.recordings_dir / MANIFEST_FILE

    @property
    def lock(self) -> Path:
        return self.recordings_dir / LOCK_FILE

    def recording(self, index: int) -> Path:
        """The path of recordings file ``index``."""
        return self.recordings_dir / recording_file_name(index)

    def landed_indexes(self) -> list[int]:
        """The indexes of the recordings files now in the folder, ascending."""
        if not self.recordings_dir.is_dir():
            return []
        indexes = (recording_file_index(p.name) for p in self.recordings_dir.iterdir())
        return sorted(i for i in indexes if i is not None)
