"""What kind each landed record is, and how many of each kind a file or a landing holds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class RecordKind(StrEnum):
    """The kind of one line of a recordings file: good, or the one defect it carries."""

    GOOD = "good"
    #: Not valid JSON (a truncated object).
    MALFORMED = "malformed"
    #: Valid JSON, but a field has the wrong JSON type (e.g. ``"heartrate": "abc"``).
    WRONG_TYPE = "wrong_type"
    #: Well typed, but ``heartrate <= 0``; the course's silver table excludes these.
    NON_POSITIVE_HEARTRATE = "non_positive_heartrate"
    #: Well typed, but the ``mrn`` is not in the patients CSV, so the silver join drops it.
    UNKNOWN_PATIENT = "unknown_patient"


#: Every kind of bad record, in the order bad records cycle through them.
BAD_KINDS: tuple[RecordKind, ...] = (
    RecordKind.MALFORMED,
    RecordKind.WRONG_TYPE,
    RecordKind.NON_POSITIVE_HEARTRATE,
    RecordKind.UNKNOWN_PATIENT,
)

# Iterating an Enum is slow, and counts are made per file: resolve the names once. A
# RecordKind is a str equal to its value, so these also look kinds up in a Counter.
_KIND_NAMES: tuple[str, ...] = tuple(kind.value for kind in RecordKind)


@dataclass(frozen=True)
class RecordCounts:
    """How many records of each kind; one field per :class:`RecordKind`."""

    good: int = 0
    malformed: int = 0
    wrong_type: int = 0
    non_positive_heartrate: int = 0
    unknown_patient: int = 0

    @property
    def bad(self) -> int:
        """Records of any bad kind."""
        return self.total - self.good

    @property
    def total(self) -> int:
        """All records, good and bad (one per line)."""
        return sum(getattr(self, name) for name in _KIND_NAMES)

    def of(self, kind: RecordKind | str) -> int:
        """The count of one kind."""
        return int(getattr(self, RecordKind(kind).value))

    def __add__(self, other: RecordCounts) -> RecordCounts:
        return RecordCounts(**{name: getattr(self, name) + getattr(other, name)
                               for name in _KIND_NAMES})

    def as_dict(self) -> dict[str, int]:
        """The counts by kind name, plus ``total``; the manifest's and CLI's format."""
        counts = {name: getattr(self, name) for name in _KIND_NAMES}
        counts["total"] = self.total
        return counts

    @classmethod
    def from_kinds(cls, kinds: Iterable[RecordKind]) -> RecordCounts:
        """Count a sequence of record kinds."""
        tally: Counter[str] = Counter(kinds)  # a RecordKind is a str equal to its value
        return cls(**{name: tally.get(name, 0) for name in _KIND_NAMES})

    @classmethod
    def from_dict(cls, counts: Mapping[str, int]) -> RecordCounts:
        """Read :meth:`as_dict` output back; ``total`` is recomputed, not trusted."""
        return cls(**{name: int(counts.get(name, 0)) for name in _KIND_NAMES})

    @classmethod
    def sum(cls, many: Iterable[RecordCounts]) -> RecordCounts:
        """The counts of several files together."""
        return sum(many, cls())
