"""Changes to patient records, a change-data feed landing as JSON lines, like a CDC export
(``patient_changes/patient_changes-000001.json``, ...; the format is in docs/guides/cdc.md).

Changes arrive out of order, as a CDC consumer must expect: ``late_share`` of each file's
changes land 1 to 3 files after the file their ``seq`` belongs to (never a file's last change,
so every late change is provably late), and each file's lines are shuffled. File k's changes
are numbered ``(k - 1) * changes_per_file + 1 .. k * changes_per_file`` wherever they land,
and file k is a pure function of the settings and k, so the same settings always give
byte-identical files. The settings identify the feed: a folder holds one feed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from lakehouse_assets.location import Location
from lakehouse_assets.simulator._atomic import (
    fsync_directory,
    read_bytes,
    remove_temporaries,
    write_all_atomically,
)
from lakehouse_assets.simulator._lock import landing_lock
from lakehouse_assets.simulator._random import Stream, rng
from lakehouse_assets.simulator.config import (
    DEFAULT_DEVICE_COUNT,
    DEFAULT_PATIENT_COUNT,
    DEFAULT_SEED,
    SimulatorConfig,
    require_count,
    require_number,
)
from lakehouse_assets.simulator.errors import LandingStateError
from lakehouse_assets.simulator.lander import check_patients_csv
from lakehouse_assets.simulator.layout import LandedPath, LandingLayout, landed_path, landing_location, numbered_indexes
from lakehouse_assets.simulator.patients import generate_patients, patients_csv

PATIENT_CHANGES_DIR = "patient_changes"
DEFAULT_CHANGES_PER_FILE = 20
DEFAULT_LATE_SHARE = 0.2

_UPSERT = "UPSERT"
_DELETE = "DELETE"
_DELETE_SHARE = 1 / 8
#: A late change lands at most this many files after the file its ``seq`` belongs to.
_MAX_FILES_LATE = 3
# As the recordings lander: the fsyncs of a group overlap, and open files stay few.
_FILES_PER_WRITE = 32
# Names patients change to (marriage, a corrected spelling); few, so the same name comes back.
_NEW_NAMES = (
    "Anna Novak", "Ben Okafor", "Chen Wang", "Elena Rossi", "Fatima Ahmed", "Grace Kim",
    "Jack Murphy", "Leila Silva", "Maria Garcia", "Omar Patel", "Sara Cohen", "Yusuf Ito",
)

# The changes fall on this many of the reference patients (the first ones of the CSV), so a
# patient's history holds several versions, late and deleted ones among them.
_CHANGING_PATIENTS = 25

_FILE_NAME = re.compile(r"patient_changes-(\d{6})\.json")


@dataclass(frozen=True)
class PatientChangesResult:
    """What one call of :func:`land_patient_changes` landed."""

    #: ``<landing_root>/patient_changes``: a local path on a disk, a location on object storage.
    folder: LandedPath
    #: The files landed by this call, in landing order.
    paths: tuple[LandedPath, ...]
    #: Changes of each op in those files.
    upserts: int
    deletes: int

    @property
    def changes(self) -> int:
        """All changes in the files landed by this call."""
        return self.upserts + self.deletes


def land_patient_changes(
    landing_root: Location | Path | str,
    *,
    files: int,
    changes_per_file: int = DEFAULT_CHANGES_PER_FILE,
    late_share: float = DEFAULT_LATE_SHARE,
    seed: int = DEFAULT_SEED,
    patient_count: int = DEFAULT_PATIENT_COUNT,
    device_count: int = DEFAULT_DEVICE_COUNT,
) -> PatientChangesResult:
    """Land the next ``files`` files of patient changes into ``<landing_root>/patient_changes/``,
    numbered after the files already there. Each file's ``seq`` block holds ``changes_per_file``
    changes, of which ``round(late_share * changes_per_file)`` (at most all but one) land in a
    later file; they name the patients of the data set ``seed``, ``patient_count`` and
    ``device_count`` identify. Raises :class:`LandingStateError` (landing nothing) if the folder
    holds another feed, or the patients CSV there is another data set's.
    """
    require_count("files", files)
    require_count("changes_per_file", changes_per_file, minimum=1)
    require_number("late_share", late_share, high=1.0)
    # The data set's config validates the seed and counts as land() does.
    config = SimulatorConfig(seed=seed, patient_count=patient_count, device_count=device_count)
    patients = generate_patients(seed=config.seed, patient_count=config.patient_count,
                                 device_count=config.device_count)
    feed = _Feed(seed=seed, mrns=tuple(p.mrn for p in patients)[:_CHANGING_PATIENTS],
                 changes_per_file=changes_per_file, late_share=late_share)
    layout = LandingLayout(landing_location(landing_root))
    folder = layout.root / PATIENT_CHANGES_DIR
    folder.mkdir()
    with landing_lock(layout.root, PATIENT_CHANGES_DIR):
        # Under the lock, a temporary file is a dead lander's: ingestion skips it, but it
        # must not pile up.
        remove_temporaries(folder)
        check_patients_csv(layout.patients_csv, patients_csv(patients), config)
        landed = numbered_indexes(folder, _FILE_NAME)
        if landed and read_bytes(folder / _file_name(landed[-1])) != _content(feed.file(landed[-1])):
            # Another feed's seq blocks would overlap this one's, and its late changes would
            # never arrive.
            raise LandingStateError(
                f"{folder / _file_name(landed[-1])} is not file {landed[-1]} of the patient "
                f"changes of seed {seed} with {changes_per_file} changes per file and late "
                f"share {late_share}. Land with the settings it was made with, or into "
                "another landing folder.")
        first = landed[-1] + 1 if landed else 1
        indexes = range(first, first + files)
        paths = tuple(folder / _file_name(index) for index in indexes)
        changes = [feed.file(index) for index in indexes]
        for start in range(0, files, _FILES_PER_WRITE):
            group = slice(start, start + _FILES_PER_WRITE)
            write_all_atomically([(path, _content(file_changes)) for path, file_changes
                                  in zip(paths[group], changes[group], strict=True)])
        if files:
            fsync_directory(folder)  # one directory sync makes every rename above durable
    deletes = sum(change.op == _DELETE for file_changes in changes for change in file_changes)
    return PatientChangesResult(folder=landed_path(folder), paths=tuple(map(landed_path, paths)),
                                upserts=sum(map(len, changes)) - deletes, deletes=deletes)


def _file_name(index: int) -> str:
    # Six digits, as the recordings: names sort in landing order.
    return f"patient_changes-{index:06d}.json"


@dataclass(frozen=True)
class _Change:
    mrn: int
    name: str | None
    op: str
    seq: int
    #: The file the change lands in: its own block's, or a later one if it is late.
    lands_in: int
    #: Orders the lines of the file it lands in (a random key per line is a random shuffle).
    order_key: float

    def line(self) -> str:
        return json.dumps({"mrn": self.mrn, "name": self.name, "op": self.op, "seq": self.seq},
                          separators=(",", ":"))


def _content(changes: list[_Change]) -> bytes:
    """A file's bytes: one change per line, each line ending in ``\\n``, UTF-8."""
    return "".join(change.line() + "\n" for change in changes).encode("utf-8")


@dataclass(frozen=True)
class _Feed:
    """The feed's files, each computed from scratch from the settings."""

    seed: int
    mrns: tuple[int, ...]
    changes_per_file: int
    late_share: float

    def file(self, index: int) -> list[_Change]:
        """The changes landing in file ``index``, in line order (shuffled)."""
        arriving = [change
                    for block in range(max(1, index - _MAX_FILES_LATE), index + 1)
                    for change in self._block(block) if change.lands_in == index]
        arriving.sort(key=lambda change: (change.order_key, change.seq))
        return arriving

    def _block(self, index: int) -> list[_Change]:
        """The changes whose ``seq`` belongs to file ``index``, wherever they land."""
        size = self.changes_per_file
        # The patients' stream keyed by a file index: the patients CSV draws on it with no
        # index, so the feed never shifts the patients. (numpy reads a missing key as 0, and
        # indexes start at 1, so no file shares the patients' stream.)
        gen = rng(self.seed, Stream.PATIENTS, index)
        patients = gen.integers(len(self.mrns), size=size).tolist()
        deleted = (gen.random(size) < _DELETE_SHARE).tolist()
        names = gen.integers(len(_NEW_NAMES), size=size).tolist()
        # Never the block's last change: it lands on time, so every late change is provably
        # late, its seq below one a reader has already seen.
        late_count = min(round(self.late_share * size), size - 1)
        late = gen.choice(size - 1, size=late_count, replace=False).tolist() if late_count else []
        files_late = dict(zip(late, gen.integers(1, _MAX_FILES_LATE + 1, size=late_count).tolist(),
                              strict=True))
        order_keys = gen.random(size).tolist()
        first_seq = (index - 1) * size + 1
        return [_Change(mrn=self.mrns[patients[i]], name=None if deleted[i] else _NEW_NAMES[names[i]],
                        op=_DELETE if deleted[i] else _UPSERT, seq=first_seq + i,
                        lands_in=index + files_late.get(i, 0), order_key=order_keys[i])
                for i in range(size)]
