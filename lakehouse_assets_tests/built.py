"""The reference lakehouse, built once per test process and restored for each test that uses it.

Most end-to-end tests start from the same state: the reference data landed (recordings with
every kind of bad record, the patients CSV, patient changes) and the whole graph materialized.
Building it takes one or two runs of the graph (half a minute each on 2 cores); copying it
takes milliseconds. So a test process builds it once (:func:`build_lakehouse`; in ``make
test``, the files using it all go to one worker: ``conftest.REFERENCE_LAKEHOUSE_FILES``), keeps the
result aside as built (``pristine``), and a test that uses it gets a fresh copy at the same
path (``root``) with ``LAKEHOUSE_ROOT`` pointing there: a test may change it at will.

The copy goes back to the same path on purpose: Spark's file stream source records the landed
files by absolute path in the bronze checkpoints, so a copy elsewhere would ingest everything
again. Delta's connector lists a table's log on each read, so a table that went back to an
earlier version between tests is read as it now is (tried with Delta 4.4 on Spark 4.2).

The build itself is a proof others rely on: its first run is Materialize all with only the
seeds' data landed (``seeds_run``: the change flow is skipped), its second Materialize all once
the patient changes and a snapshot of the patients landed too (``changes_run``: only the change
flows have new data). Between them, every table of the graph is materialized.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import (
    Dataset,
    LandingResult,
    PatientChangesResult,
    RecordKind,
    SimulatorConfig,
    land,
    land_patient_changes,
)
from lakehouse_assets_tests.assets.pipeline import materialize

#: How the reference recordings are landed: every kind of bad record (10%), a file a day.
RECORDINGS = dict(records_per_file=300, bad_rate=0.1, seed=23, files_per_year=365)
RECORDING_FILES = 2
#: Patient changes name the patients of the same data set (its seed).
CHANGES = dict(changes_per_file=30, seed=RECORDINGS["seed"])
CHANGE_FILES = 2


@dataclass(frozen=True)
class BuildRun:
    """One Materialize all of the build: its result and the instance holding its log."""

    result: dg.ExecuteInProcessResult
    instance: dg.DagsterInstance

    def log(self) -> str:
        """Every message of the run's log, as the UI lists it."""
        return "\n".join(entry.user_message for entry in self.instance.all_logs(self.result.run_id))


@dataclass(frozen=True)
class BuiltLakehouse:
    """The reference lakehouse: where tests use it, its copy as built, and how it was built."""

    root: Path
    pristine: Path
    recordings: LandingResult
    changes: PatientChangesResult
    seeds_run: BuildRun
    changes_run: BuildRun

    @property
    def settings(self) -> LakehouseSettings:
        return LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(self.root)})

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    def restore(self) -> LakehouseSettings:
        """Put the lakehouse back as built, at ``root``."""
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.copytree(self.pristine, self.root, symlinks=True)
        return self.settings

    def land_recordings(self, files: int, **options: object) -> LandingResult:
        """Land the reference data set's next ``files`` recordings files (``options`` override
        how, e.g. ``bad_rate=0.0``; the data set, its seed and file cadence, stays)."""
        return land(self.landing, files=files, **{**RECORDINGS, **options})  # type: ignore[arg-type]

    def good_lines(self, file: int = 1) -> bytes:
        """The lines of landed recordings file ``file`` (1-based) holding good records, as
        landed: records every rule passes."""
        generated = Dataset(SimulatorConfig(**RECORDINGS)).file(file)  # type: ignore[arg-type]
        lines = generated.content.splitlines(keepends=True)
        return b"".join(line for line, kind in zip(lines, generated.kinds, strict=True) if kind is RecordKind.GOOD)

    def land_changes(self, files: int) -> PatientChangesResult:
        """Land the next ``files`` files of patient changes."""
        return land_patient_changes(self.landing, files=files, **CHANGES)  # type: ignore[arg-type]


def build_lakehouse(work_dir: Path) -> BuiltLakehouse:
    """Land the reference data at ``work_dir/lakehouse`` and materialize all twice (seeds' data
    only, then with the patient changes), then keep a copy as built."""
    root = work_dir / "lakehouse"
    root.mkdir(parents=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAKEHOUSE_ROOT", str(root))
        recordings = land(root / "landing", files=RECORDING_FILES, **RECORDINGS)  # type: ignore[arg-type]
        seeds_run = _materialize_all()
        changes = land_patient_changes(root / "landing", files=CHANGE_FILES, **CHANGES)  # type: ignore[arg-type]
        _land_snapshot(root / "landing", recordings.patients_path)
        changes_run = _materialize_all()
    pristine = work_dir / "pristine"
    shutil.copytree(root, pristine, symlinks=True)
    return BuiltLakehouse(root, pristine, recordings, changes, seeds_run, changes_run)


def _land_snapshot(landing: Path, patients: Path) -> None:
    """A first full snapshot of the patients lookup: its first ten patients."""
    folder = landing / "patient_snapshots"
    folder.mkdir(parents=True)
    lines = patients.read_text().splitlines(keepends=True)
    (folder / "patients-0001.csv").write_text("".join(lines[:11]))


def _materialize_all() -> BuildRun:
    instance = dg.DagsterInstance.ephemeral()
    return BuildRun(materialize("*", instance=instance), instance)
