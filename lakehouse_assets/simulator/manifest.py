"""The landing manifest: which files were landed from which data set, and what each holds.

It is ``recordings/_manifest.json`` (ignored by ingestion: the name starts with ``_``), so
tests and the CLI can learn exact per-kind counts without re-reading the recordings. It is
also half of the lander's memory of "what comes next" (the other half is the folder itself:
see :mod:`lakehouse_assets.simulator.lander`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse_assets.location import Location
from lakehouse_assets.simulator._atomic import read_bytes, write_atomically
from lakehouse_assets.simulator.config import SimulatorConfig
from lakehouse_assets.simulator.errors import LandingStateError
from lakehouse_assets.simulator.kinds import RecordCounts, RecordKind
from lakehouse_assets.simulator.layout import (
    LandedPath,
    LandingLayout,
    landed_path,
    landing_location,
)

MANIFEST_FORMAT = 1


@dataclass(frozen=True)
class DatasetIdentity:
    """The settings that make two landings the same data set; one landing folder holds one."""

    seed: int
    patient_count: int
    device_count: int
    files_per_year: int

    @classmethod
    def of(cls, config: SimulatorConfig) -> DatasetIdentity:
        return cls(seed=config.seed, patient_count=config.patient_count,
                   device_count=config.device_count, files_per_year=config.files_per_year)


@dataclass(frozen=True)
class LandedFile:
    """One landed recordings file and what is in it."""

    #: 1-based position in the data set: file k covers the k-th slice of 2020.
    index: int
    #: A local path on a disk, a location on object storage.
    path: LandedPath
    #: The slice ``[start_time, end_time)`` of 2020, unix seconds, its records' times fall in.
    start_time: float
    end_time: float
    #: The settings it was generated with (they may differ from file to file).
    bad_rate: float
    bad_kinds: tuple[RecordKind, ...]
    #: Lines per kind; ``counts.total`` is the number of lines.
    counts: RecordCounts


@dataclass(frozen=True)
class LandingManifest:
    """Everything landed into one landing folder, by file index."""

    dataset: DatasetIdentity
    #: Ascending by index, one entry per index.
    files: tuple[LandedFile, ...] = ()

    @property
    def counts(self) -> RecordCounts:
        """The per-kind counts of all landed files together."""
        return RecordCounts.sum(f.counts for f in self.files)

    @property
    def last_index(self) -> int:
        """The highest landed index, 0 if none."""
        return self.files[-1].index if self.files else 0

    def with_files(self, landed: Iterable[LandedFile]) -> LandingManifest:
        """This manifest plus ``landed``; a file landed again replaces its old entry."""
        by_index = {f.index: f for f in self.files}
        by_index.update((f.index, f) for f in landed)
        return LandingManifest(self.dataset, tuple(by_index[i] for i in sorted(by_index)))


def read_manifest(landing_root: Location | Path | str) -> LandingManifest | None:
    """The manifest of a landing folder (local, or on object storage), or None if nothing was
    landed there yet."""
    layout = LandingLayout(landing_location(landing_root))
    data = read_bytes(layout.manifest)
    if data is None:
        return None
    try:
        return _decode(json.loads(data.decode("utf-8")), layout)
    except (ValueError, KeyError, TypeError) as exc:
        raise LandingStateError(
            f"The landing manifest {layout.manifest} is unreadable ({exc}). It is rewritten on "
            "every landing; delete it to rebuild numbering from the files in the folder "
            "(their per-kind counts are then lost).") from exc


def write_manifest(landing_root: Location | Path | str, manifest: LandingManifest) -> None:
    """Replace the landing folder's manifest atomically."""
    layout = LandingLayout(landing_location(landing_root))
    write_atomically(layout.manifest, _encode(manifest).encode("utf-8"))


def _encode(manifest: LandingManifest) -> str:
    head = {
        "format": MANIFEST_FORMAT,
        "dataset": dataclasses.asdict(manifest.dataset),
        # Totals are for people reading the file; reading recomputes them.
        "counts": manifest.counts.as_dict(),
    }
    entries = [
        json.dumps({"index": f.index, "name": f.path.name, "start_time": f.start_time,
                    "end_time": f.end_time, "bad_rate": f.bad_rate,
                    "bad_kinds": [k.value for k in f.bad_kinds], "counts": f.counts.as_dict()})
        for f in manifest.files
    ]
    # One file per line keeps it readable and diffable, while each line goes through json's
    # C encoder (indent= would switch to the pure-Python one, 10x slower on a year of files).
    return json.dumps(head)[:-1] + ', "files": [\n' + ",\n".join(entries) + "\n]}\n"


def _decode(data: dict[str, Any], layout: LandingLayout) -> LandingManifest:
    if data.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"unknown manifest format {data.get('format')!r}")
    identity = DatasetIdentity(**{k: int(v) for k, v in data["dataset"].items()})
    files = tuple(
        LandedFile(
            index=int(entry["index"]),
            path=landed_path(layout.recording(int(entry["index"]))),
            start_time=float(entry["start_time"]), end_time=float(entry["end_time"]),
            bad_rate=float(entry["bad_rate"]),
            bad_kinds=tuple(RecordKind(k) for k in entry["bad_kinds"]),
            counts=RecordCounts.from_dict(entry["counts"]),
        )
        for entry in data["files"]
    )
    return LandingManifest(identity, tuple(sorted(files, key=lambda f: f.index)))
