"""Landing the reference data set, file after file, as the course's ``DA.data_factory.load()``.

"Next" is kept in two places, and the lander trusts whichever is further along: the manifest
(which survives ingestion moving or deleting processed files) and the files in the folder
(which survive a crash between landing a file and rewriting the manifest). So numbering never
goes back or repeats, and an interrupted landing resumes after the last file that appeared.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from lakehouse_assets.location import Location
from lakehouse_assets.simulator._atomic import (
    fsync_directory,
    read_bytes,
    remove_temporaries,
    write_all_atomically,
    write_atomically,
)
from lakehouse_assets.simulator._lock import landing_lock
from lakehouse_assets.simulator.config import (
    DEFAULT_DEVICE_COUNT,
    DEFAULT_FILES_PER_YEAR,
    DEFAULT_PATIENT_COUNT,
    DEFAULT_RECORDS_PER_FILE,
    DEFAULT_SEED,
    SimulatorConfig,
    require_count,
    require_number,
)
from lakehouse_assets.simulator.dataset import Dataset
from lakehouse_assets.simulator.errors import DatasetExhaustedError, LandingStateError
from lakehouse_assets.simulator.kinds import BAD_KINDS, RecordCounts, RecordKind
from lakehouse_assets.simulator.layout import (
    RECORDINGS_DIR,
    LandedPath,
    LandingLayout,
    landed_path,
    landing_location,
)
from lakehouse_assets.simulator.manifest import (
    DatasetIdentity,
    LandedFile,
    LandingManifest,
    read_manifest,
    write_manifest,
)

# Files are generated and written in groups: their fsyncs overlap (see _atomic), while memory
# stays bounded at a few dozen files' bytes however many files one call lands.
_FILES_PER_WRITE = 32


@dataclass(frozen=True)
class LandingResult:
    """What one call of :func:`land` or :func:`land_continuously` landed. Paths are local
    :class:`~pathlib.Path` objects on a disk, locations on object storage (see
    :data:`~lakehouse_assets.simulator.layout.LandedPath`)."""

    landing_root: LandedPath
    patients_path: LandedPath
    #: Whether this call wrote the patients CSV (it is written only when missing).
    patients_written: bool
    #: The files landed by this call, in landing order.
    files: tuple[LandedFile, ...]

    @property
    def paths(self) -> tuple[LandedPath, ...]:
        """The landed recordings files, in landing order."""
        return tuple(f.path for f in self.files)

    @property
    def counts(self) -> RecordCounts:
        """Per-kind counts over all files landed by this call."""
        return RecordCounts.sum(f.counts for f in self.files)


def land(
    landing_root: Location | Path | str,
    *,
    files: int,
    records_per_file: int = DEFAULT_RECORDS_PER_FILE,
    bad_rate: float = 0.0,
    seed: int = DEFAULT_SEED,
    start_index: int | None = None,
    bad_kinds: Sequence[RecordKind | str] = BAD_KINDS,
    patient_count: int = DEFAULT_PATIENT_COUNT,
    device_count: int = DEFAULT_DEVICE_COUNT,
    files_per_year: int = DEFAULT_FILES_PER_YEAR,
) -> LandingResult:
    """Land the next ``files`` recordings files of the data set into
    ``<landing_root>/recordings/`` (a local folder or a :class:`~lakehouse_assets.location.Location`
    on object storage), and the patients CSV if it is missing. ``start_index`` lands from that
    index instead of after every file landed before. Each file appears atomically, and the same
    seed and settings always give byte-identical files for the same indexes.

    Raises :class:`DatasetExhaustedError` (landing nothing) if the files would run past the end
    of 2020, and :class:`LandingStateError` if the folder holds another data set.
    """
    config = _config(seed=seed, records_per_file=records_per_file, bad_rate=bad_rate,
                     bad_kinds=bad_kinds, patient_count=patient_count,
                     device_count=device_count, files_per_year=files_per_year)
    return _Lander(landing_location(landing_root), config).land(files=files, start_index=start_index)


def land_continuously(
    landing_root: Location | Path | str,
    *,
    interval_seconds: float,
    stop_event: threading.Event | None = None,
    max_files: int | None = None,
    on_landed: Callable[[LandedFile], None] | None = None,
    records_per_file: int = DEFAULT_RECORDS_PER_FILE,
    bad_rate: float = 0.0,
    seed: int = DEFAULT_SEED,
    bad_kinds: Sequence[RecordKind | str] = BAD_KINDS,
    patient_count: int = DEFAULT_PATIENT_COUNT,
    device_count: int = DEFAULT_DEVICE_COUNT,
    files_per_year: int = DEFAULT_FILES_PER_YEAR,
) -> LandingResult:
    """Land the next file, then one more every ``interval_seconds``, until ``stop_event`` is
    set (which also cuts the current wait short), ``max_files`` have landed, or the year's last
    file has landed, whichever comes first; with neither it runs until interrupted. ``on_landed``
    is called after each file appears. Returns everything this call landed.
    """
    require_number("interval_seconds", interval_seconds)
    if max_files is not None:
        require_count("max_files", max_files)
    config = _config(seed=seed, records_per_file=records_per_file, bad_rate=bad_rate,
                     bad_kinds=bad_kinds, patient_count=patient_count,
                     device_count=device_count, files_per_year=files_per_year)
    lander = _Lander(landing_location(landing_root), config)
    # A private event stands in for "never stopped", so one wait() serves both cases.
    stop = stop_event if stop_event is not None else threading.Event()
    landed: list[LandedFile] = []
    patients_written = False
    while not stop.is_set() and (max_files is None or len(landed) < max_files):
        try:
            result = lander.land(files=1)
        except DatasetExhaustedError:
            break  # the year is complete: nothing left to land
        landed.extend(result.files)
        patients_written = patients_written or result.patients_written
        if on_landed is not None:
            for landed_file in result.files:
                on_landed(landed_file)
        if max_files is not None and len(landed) >= max_files:
            break  # do not make the caller wait an interval for nothing
        stop.wait(interval_seconds)
    return LandingResult(landing_root=landed_path(lander.layout.root),
                         patients_path=landed_path(lander.layout.patients_csv),
                         patients_written=patients_written, files=tuple(landed))


def next_file_index(landing_root: Location | Path | str) -> int:
    """The index the next landed file will get: one past the furthest file that the manifest
    or the folder knows of (1 for an empty folder)."""
    layout = LandingLayout(landing_location(landing_root))
    return _next_index(layout, read_manifest(layout.root))


class _Lander:
    """One data set landing into one folder; builds the data set's patients only once."""

    def __init__(self, root: Location, config: SimulatorConfig) -> None:
        self.layout = LandingLayout(root)
        self.config = config
        self.dataset = Dataset(config)

    def land(self, *, files: int, start_index: int | None = None) -> LandingResult:
        require_count("files", files)
        if start_index is not None:
            require_count("start_index", start_index, minimum=1)
        layout, config = self.layout, self.config
        layout.recordings_dir.mkdir()
        with landing_lock(layout.root, RECORDINGS_DIR):
            # Under the lock, a temporary file is a dead lander's: ingestion skips it, but it
            # must not pile up.
            remove_temporaries(layout.recordings_dir)
            remove_temporaries(layout.patients_dir)
            identity = DatasetIdentity.of(config)
            manifest = read_manifest(layout.root)
            if manifest is not None and manifest.dataset != identity:
                raise LandingStateError(
                    f"{layout.root} holds the data set {manifest.dataset}, not {identity}. "
                    "Land with the same settings, or into an empty landing folder.")
            patients_written = self._ensure_patients()
            first = start_index if start_index is not None else _next_index(layout, manifest)
            if first + files - 1 > config.files_per_year:
                raise DatasetExhaustedError(next_index=first, requested=files,
                                            files_per_year=config.files_per_year)
            landed: list[LandedFile] = []
            try:
                for chunk_start in range(first, first + files, _FILES_PER_WRITE):
                    chunk_end = min(chunk_start + _FILES_PER_WRITE, first + files)
                    landed.extend(self._land_files(range(chunk_start, chunk_end)))
            finally:
                # Even if a later group failed, record the groups that did land: their counts
                # cannot be recovered from the folder alone.
                if landed:
                    # One directory sync makes every rename above durable.
                    fsync_directory(layout.recordings_dir)
                    base = manifest if manifest is not None else LandingManifest(identity)
                    write_manifest(layout.root, base.with_files(landed))
        return LandingResult(landing_root=landed_path(layout.root),
                             patients_path=landed_path(layout.patients_csv),
                             patients_written=patients_written, files=tuple(landed))

    def _land_files(self, indexes: range) -> list[LandedFile]:
        generated = [self.dataset.file(index) for index in indexes]
        paths = [self.layout.recording(g.index) for g in generated]
        write_all_atomically([(path, g.content) for path, g in zip(paths, generated, strict=True)])
        return [LandedFile(index=g.index, path=landed_path(path), start_time=g.start_time,
                           end_time=g.end_time, bad_rate=self.config.bad_rate,
                           bad_kinds=self.config.bad_kinds, counts=g.counts)
                for path, g in zip(paths, generated, strict=True)]

    def _ensure_patients(self) -> bool:
        path, expected = self.layout.patients_csv, self.dataset.patients_csv()
        if check_patients_csv(path, expected, self.config):
            return False
        path.parent.mkdir()
        write_atomically(path, expected)
        fsync_directory(path.parent)
        return True


def check_patients_csv(path: Location, expected: bytes, config: SimulatorConfig) -> bool:
    """Whether the patients CSV is at ``path``; raises :class:`LandingStateError` when it is not
    ``expected``, the one of the data set ``config`` identifies."""
    found = read_bytes(path)
    # Every count the lander reports (unknown_patient above all), and the patients the changes
    # name, assume this exact CSV: one from another seed or an edited one must not pass silently.
    if found is not None and found != expected:
        raise LandingStateError(
            f"{path} is not the patients CSV of seed {config.seed} with {config.patient_count} patients; "
            "the landed records would name other patients. Land with the seed it was made with, or into "
            "another landing folder.")
    return found is not None


def _config(*, seed: int, records_per_file: int, bad_rate: float,
            bad_kinds: Sequence[RecordKind | str], patient_count: int, device_count: int,
            files_per_year: int) -> SimulatorConfig:
    # SimulatorConfig turns kind names into kinds (and refuses unknown ones, and a plain string).
    kinds = cast("tuple[RecordKind, ...]", bad_kinds)
    return SimulatorConfig(seed=seed, records_per_file=records_per_file, bad_rate=bad_rate,
                           bad_kinds=kinds, patient_count=patient_count,
                           device_count=device_count, files_per_year=files_per_year)


def _next_index(layout: LandingLayout, manifest: LandingManifest | None) -> int:
    in_folder = layout.landed_indexes()
    furthest = max(manifest.last_index if manifest is not None else 0,
                   in_folder[-1] if in_folder else 0)
    return furthest + 1

