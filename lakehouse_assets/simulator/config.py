"""The shape of the reference data set: who, how many, over which year, and how dirty.

Two landings made with equal configs hold byte-identical files for the same file numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.simulator.kinds import BAD_KINDS, RecordKind

#: The year the recordings cover, as in the course (2020 is a leap year: 366 days).
YEAR = 2020
YEAR_START = 1_577_836_800  # 2020-01-01T00:00:00Z, unix seconds
YEAR_END = 1_609_459_200  # 2021-01-01T00:00:00Z, exclusive

DEFAULT_SEED = 0
DEFAULT_RECORDS_PER_FILE = 5_000
DEFAULT_PATIENT_COUNT = 1_000
DEFAULT_DEVICE_COUNT = 50
#: One file per hour of 2020: enough files that long landings (1,000 small files in the
#: benchmarks) never run out, while each file still spans a whole number of seconds.
DEFAULT_FILES_PER_YEAR = (YEAR_END - YEAR_START) // 3_600
#: File names carry the number in six digits, so they sort in landing order.
MAX_FILES_PER_YEAR = 999_999


@dataclass(frozen=True)
class SimulatorConfig:
    """Everything that decides the bytes of the landed files.

    ``seed``, ``patient_count``, ``device_count`` and ``files_per_year`` identify the data set:
    a landing folder holds one data set. ``records_per_file``, ``bad_rate`` and ``bad_kinds``
    only shape the files landed with them, and may change from one landing to the next.
    """

    seed: int = DEFAULT_SEED
    #: Lines per recordings file, bad ones included.
    records_per_file: int = DEFAULT_RECORDS_PER_FILE
    #: Share of lines that are bad, in [0, 1]. Exact over many files: after n files of R
    #: records, floor(bad_rate * R * n) lines are bad.
    bad_rate: float = 0.0
    #: The kinds bad lines cycle through, in order.
    bad_kinds: tuple[RecordKind, ...] = BAD_KINDS
    patient_count: int = DEFAULT_PATIENT_COUNT
    device_count: int = DEFAULT_DEVICE_COUNT
    #: The year is cut into this many equal slices; file k holds the k-th.
    files_per_year: int = DEFAULT_FILES_PER_YEAR

    def __post_init__(self) -> None:
        # Normalize before validating so that a list or plain strings are accepted, and the
        # frozen instance still compares and hashes by value.
        object.__setattr__(self, "bad_kinds", _bad_kinds(self.bad_kinds))
        require_count("seed", self.seed)
        for name in ("records_per_file", "patient_count", "device_count", "files_per_year"):
            require_count(name, getattr(self, name), minimum=1)
        if self.files_per_year > MAX_FILES_PER_YEAR:
            raise ConfigurationError(
                f"files_per_year must be at most {MAX_FILES_PER_YEAR} "
                f"(file names have six digits), got {self.files_per_year}")
        require_number("bad_rate", self.bad_rate, high=1.0)
        if self.device_count > self.patient_count:
            raise ConfigurationError(
                f"device_count ({self.device_count}) must not exceed patient_count "
                f"({self.patient_count}): every device is worn by at least one patient")

    @cached_property
    def bad_fraction(self) -> Fraction:
        """``bad_rate`` as the short fraction it was meant to be (0.29 is 29/100, not the
        nearest binary float), so that floor(bad_rate * records) never lands one short.
        Cached: it is used for every file and ``limit_denominator`` is slow."""
        return Fraction(self.bad_rate).limit_denominator(10**9)


def require_count(name: str, value: object, *, minimum: int = 0) -> None:
    """Refuse ``value`` unless it is a whole number >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be a whole number >= {minimum}, got {value!r}")


def require_number(name: str, value: object, *, high: float = math.inf) -> None:
    """Refuse ``value`` unless it is a finite number in ``[0, high]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= high:
        bound = f"in [0, {high:g}]" if math.isfinite(high) else ">= 0"
        raise ConfigurationError(f"{name} must be a finite number {bound}, got {value!r}")


def _bad_kinds(kinds: Sequence[RecordKind | str]) -> tuple[RecordKind, ...]:
    if isinstance(kinds, str):
        # tuple("malformed") would be nine one-letter kinds: say what was meant instead.
        raise ConfigurationError(f"bad_kinds must be a sequence of kinds, e.g. ({kinds!r},), not a string")
    try:
        parsed = tuple(RecordKind(kind) for kind in kinds)
    except ValueError as exc:
        raise ConfigurationError(
            f"bad_kinds must be among {[k.value for k in BAD_KINDS]}: {exc}") from exc
    if not parsed:
        raise ConfigurationError("bad_kinds must name at least one kind of bad record")
    if RecordKind.GOOD in parsed:
        raise ConfigurationError("bad_kinds must not contain 'good'")
    if len(set(parsed)) != len(parsed):
        raise ConfigurationError(f"bad_kinds has duplicates: {[k.value for k in parsed]}")
    return parsed
