"""Where things go in a landing folder (a local folder or a prefix on object storage), and
which of its files are data:

    <landing_root>/
      patients/patients.csv            the PII lookup (mrn,name), written once
      recordings/recordings-000001.json  one JSON-lines file per slice of 2020, in order
      recordings/_manifest.json        what was landed, with per-kind counts (ingestion skips names starting _ or .)
      _locks/recordings.lock           serializes the landers of recordings/ (never data)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePath

from lakehouse_assets.location import Location, locate

RECORDINGS_DIR = "recordings"
PATIENTS_DIR = "patients"
PATIENTS_FILE = "patients.csv"
MANIFEST_FILE = "_manifest.json"

#: A landed file or folder as the simulator's results name it: a local :class:`~pathlib.Path`
#: on a disk (what callers open, stat and move), a :class:`Location` on object storage.
LandedPath = Path | Location


def landing_location(landing_root: Location | Path | str) -> Location:
    """The landing root as a location: a location as it is (one on object storage carries its
    store), or a local path."""
    if isinstance(landing_root, PurePath):
        # A path is never a URI: '#', '?' or '%' in a folder's name stay as they are.
        return Location(os.path.abspath(landing_root))
    return locate(landing_root)


def landed_path(location: Location) -> LandedPath:
    """How results name ``location``: see :data:`LandedPath`."""
    return Path(location.path) if location.is_local else location

_RECORDING_NAME = re.compile(r"recordings-(\d{6})\.json")
_TEMPORARY_NAME = re.compile(r"\..+\.\d+\.tmp")


def recording_file_name(index: int) -> str:
    """The name of recordings file ``index``: six digits, so names sort in landing order."""
    return f"recordings-{index:06d}.json"


def numbered_indexes(folder: Location, name: re.Pattern[str]) -> list[int]:
    """The indexes of the numbered files now in ``folder`` (the names ``name`` matches, its
    first group the index), ascending."""
    return sorted(int(match.group(1)) for match in map(name.fullmatch, folder.names()) if match)


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
    """The locations of one landing folder."""

    root: Location

    @property
    def recordings_dir(self) -> Location:
        return self.root / RECORDINGS_DIR

    @property
    def patients_dir(self) -> Location:
        return self.root / PATIENTS_DIR

    @property
    def patients_csv(self) -> Location:
        return self.patients_dir / PATIENTS_FILE

    @property
    def manifest(self) -> Location:
        return self.recordings_dir / MANIFEST_FILE

    def recording(self, index: int) -> Location:
        """The location of recordings file ``index``."""
        return self.recordings_dir / recording_file_name(index)

    def landed_indexes(self) -> list[int]:
        """The indexes of the recordings files now in the folder, ascending."""
        return numbered_indexes(self.recordings_dir, _RECORDING_NAME)
