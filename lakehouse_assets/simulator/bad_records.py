"""Bad records: how many each file holds, which kinds (:class:`~.kinds.RecordKind`), and how
each kind is made. Each bad line replaces one good record of the file and carries exactly one
defect, so downstream tests can classify every line without ambiguity.
"""

from __future__ import annotations

import json

import numpy as np

from lakehouse_assets.simulator._jsonl import heartrate_text, record_line, time_text
from lakehouse_assets.simulator.config import SimulatorConfig
from lakehouse_assets.simulator.kinds import RecordKind
from lakehouse_assets.simulator.patients import MRN_HIGH, MRN_LOW

# Strings no JSON reader coerces to a number: Spark parses "NaN" and "Infinity" (and a numeric
# string such as "72.5" in some modes) into doubles, so those would not be wrong types.
_WRONG_TYPES: tuple[tuple[str, str], ...] = (
    ("heartrate", "abc"),
    ("time", "yesterday"),
    ("heartrate", "n/a"),
    ("time", "soon"),
)


def bad_kinds_of_file(config: SimulatorConfig, index: int) -> tuple[RecordKind, ...]:
    """The kinds of the bad records of file ``index`` (1-based), in line order. Files 1..n hold
    exactly ``floor(bad_rate * records_per_file * n)`` bad records, and the g-th has kind
    ``bad_kinds[g % len(bad_kinds)]``: even a tiny rate over many small files yields its share,
    and the kinds split evenly, while each file depends only on its own index.
    """
    first = _bad_before(config, index - 1)
    last = _bad_before(config, index)
    kinds = config.bad_kinds
    return tuple(kinds[g % len(kinds)] for g in range(first, last))


def _bad_before(config: SimulatorConfig, files: int) -> int:
    # Integer arithmetic on the fraction's parts: exact, and far cheaper than Fraction maths.
    rate = config.bad_fraction
    return rate.numerator * config.records_per_file * files // rate.denominator


def bad_record_line(kind: RecordKind, *, device_id: int, mrn: int, time_ms: int,
                    heartrate_centi: int, known_mrns: frozenset[int],
                    gen: np.random.Generator) -> str:
    """The JSON line (without newline) of a bad record of ``kind`` made from a good record, in
    the good lines' exact format so that only the defect tells it apart."""
    text = {"device_id": str(device_id), "mrn": str(mrn), "time": time_text(time_ms),
            "heartrate": heartrate_text(heartrate_centi)}
    if kind is RecordKind.MALFORMED:
        line = record_line(**text)
        # A transmission cut short: any proper prefix of a JSON object is invalid JSON. Keeping
        # at least a third of it leaves the device id readable in the quarantine, and a
        # non-empty line is a corrupt record to Spark rather than a skipped blank line.
        return line[: int(gen.integers(len(line) // 3, len(line)))]
    if kind is RecordKind.WRONG_TYPE:
        field, value = _WRONG_TYPES[int(gen.integers(len(_WRONG_TYPES)))]
        text[field] = json.dumps(value)
    elif kind is RecordKind.NON_POSITIVE_HEARTRATE:
        # Zero (no pulse picked up), a -1 sentinel, or a sign lost in transmission.
        choice = int(gen.integers(3))
        text["heartrate"] = ("0.00", "-1.00", heartrate_text(-heartrate_centi))[choice]
    elif kind is RecordKind.UNKNOWN_PATIENT:
        text["mrn"] = str(_unknown_mrn(known_mrns, gen))
    else:
        raise ValueError(f"{kind!r} is not a kind of bad record")
    return record_line(**text)


def _unknown_mrn(known_mrns: frozenset[int], gen: np.random.Generator) -> int:
    # 1,000 known of 90 million possible: a redraw is almost never needed.
    while True:
        mrn = int(gen.integers(MRN_LOW, MRN_HIGH))
        if mrn not in known_mrns:
            return mrn

