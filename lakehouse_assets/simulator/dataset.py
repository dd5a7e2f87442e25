"""The reference data set as a whole: its patients and, file by file, its landed bytes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.simulator._jsonl import record_head, record_lines
from lakehouse_assets.simulator._random import Stream, rng
from lakehouse_assets.simulator.bad_records import bad_kinds_of_file, bad_record_line
from lakehouse_assets.simulator.config import SimulatorConfig
from lakehouse_assets.simulator.kinds import RecordCounts, RecordKind
from lakehouse_assets.simulator.patients import Patient, generate_patients, patients_csv
from lakehouse_assets.simulator.recordings import file_time_range, generate_recordings


@dataclass(frozen=True)
class GeneratedFile:
    """One recordings file, generated but not landed."""

    #: 1-based: file 1 covers the first slice of 2020.
    index: int
    #: The slice ``[start_time, end_time)`` of the year, unix seconds, that the records span.
    start_time: float
    end_time: float
    #: The JSON-lines bytes to land, one record per line, each line ending in ``\n``.
    content: bytes
    #: The kind of each line, in order.
    kinds: tuple[RecordKind, ...]
    counts: RecordCounts


class Dataset:
    """The data set a :class:`SimulatorConfig` describes. Every method is a pure function of
    the config: ``Dataset(config).file(k)`` returns the same bytes in any process, in any order."""

    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self.patients: tuple[Patient, ...] = generate_patients(
            seed=config.seed, patient_count=config.patient_count,
            device_count=config.device_count)
        # Built once per data set, so that each file is generated vectorized.
        self._resting = np.array([p.resting_heartrate for p in self.patients])
        self._known_mrns = frozenset(p.mrn for p in self.patients)
        self._heads = [record_head(p.device_id, p.mrn) for p in self.patients]

    def patients_csv(self) -> bytes:
        """The patients CSV (``mrn,name``) exactly as landed."""
        return patients_csv(self.patients)

    def file(self, index: int) -> GeneratedFile:
        """File ``index`` (1-based, at most ``files_per_year``): its bytes and the kind of each
        line."""
        config = self.config
        if isinstance(index, bool) or not isinstance(index, int) \
                or not 1 <= index <= config.files_per_year:
            raise ConfigurationError(
                f"file index must be a whole number in 1..{config.files_per_year}, got {index!r}")
        records = generate_recordings(config, self._resting, index)
        heads = self._heads
        lines = record_lines(heads=[heads[p] for p in records.patient.tolist()],
                             time_ms=records.time_ms, heartrate_centi=records.heartrate_centi)
        kinds = [RecordKind.GOOD] * config.records_per_file
        bad_kinds = bad_kinds_of_file(config, index)
        if bad_kinds:
            gen = rng(config.seed, Stream.FILE_BAD_RECORDS, index)
            # Bad records replace good ones at random lines, in line order; a bad record keeps
            # its slot's time, so the file stays ordered by time wherever time is readable.
            positions = sorted(gen.choice(config.records_per_file, size=len(bad_kinds),
                                          replace=False).tolist())
            for position, kind in zip(positions, bad_kinds, strict=True):
                patient = self.patients[int(records.patient[position])]
                lines[position] = bad_record_line(
                    kind, device_id=patient.device_id,
                    mrn=patient.mrn, time_ms=int(records.time_ms[position]),
                    heartrate_centi=int(records.heartrate_centi[position]),
                    known_mrns=self._known_mrns, gen=gen)
                kinds[position] = kind
        start_time, end_time = file_time_range(index, files_per_year=config.files_per_year)
        return GeneratedFile(
            index=index, start_time=start_time, end_time=end_time,
            content=("\n".join(lines) + "\n").encode("utf-8"),
            kinds=tuple(kinds), counts=RecordCounts.from_kinds(kinds))
