"""Good heart-rate recordings: which slice of 2020 each file covers, and the records in it.

A recording is one JSON object per line with exactly the keys ``device_id`` (int), ``mrn``
(int), ``time`` (unix seconds, a float) and ``heartrate`` (a float, bpm), as in the course.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lakehouse_assets.simulator._random import Stream, rng
from lakehouse_assets.simulator.config import YEAR_END, YEAR_START, SimulatorConfig

_SECONDS_PER_DAY = 86_400
# Heart rate wanders around the patient's resting rate, a little higher in the afternoon than
# at night (UTC, for simplicity), with beat-to-beat noise.
_DIURNAL_AMPLITUDE = 4.0
_DIURNAL_PEAK_FRACTION_OF_DAY = 15 / 24
_NOISE_SD = 4.0
# Clipping keeps every good heartrate well above 0, so a non-positive heartrate in the landed
# data is always a deliberately bad record.
_HEARTRATE_LOW = 40.0
_HEARTRATE_HIGH = 180.0


def file_time_range(index: int, *, files_per_year: int) -> tuple[float, float]:
    """The half-open slice ``[start, end)`` of 2020, in unix seconds, that file ``index``
    (1-based) covers. The slices are consecutive, equal to the millisecond, and tile the year."""
    start_ms, end_ms = _range_ms(index, files_per_year)
    return start_ms / 1000, end_ms / 1000


def _range_ms(index: int, files_per_year: int) -> tuple[int, int]:
    span_ms = (YEAR_END - YEAR_START) * 1000
    # Integer arithmetic, so neighbouring slices share their boundary exactly.
    start = YEAR_START * 1000 + span_ms * (index - 1) // files_per_year
    end = YEAR_START * 1000 + span_ms * index // files_per_year
    return start, end


@dataclass(frozen=True, eq=False)
class Recordings:
    """The good records of one file, column by column, ordered by time. ``time_ms`` and
    ``heartrate_centi`` are integers (milliseconds, hundredths of a bpm) so that the landed
    decimals are exact: 1577836800123 lands as ``1577836800.123``."""

    #: Index of each record's patient in the data set's patients (the record is on their device).
    patient: np.ndarray
    time_ms: np.ndarray
    heartrate_centi: np.ndarray


def generate_recordings(config: SimulatorConfig, resting_heartrate: np.ndarray, index: int) -> Recordings:
    """The ``config.records_per_file`` good records of file ``index`` (1-based), spread at
    random over its slice of the year and sorted by time; each from a random patient (of those
    whose resting heart rates are given, in order)."""
    gen = rng(config.seed, Stream.FILE_RECORDS, index)
    count = config.records_per_file
    start_ms, end_ms = _range_ms(index, config.files_per_year)
    time_ms = np.sort(gen.integers(start_ms, end_ms, size=count))
    patient = gen.integers(len(resting_heartrate), size=count)
    day_fraction = (time_ms // 1000 % _SECONDS_PER_DAY) / _SECONDS_PER_DAY
    diurnal = _DIURNAL_AMPLITUDE * np.cos(
        2 * np.pi * (day_fraction - _DIURNAL_PEAK_FRACTION_OF_DAY))
    heartrate = np.clip(
        resting_heartrate[patient] + diurnal + gen.normal(0.0, _NOISE_SD, size=count),
        _HEARTRATE_LOW, _HEARTRATE_HIGH)
    return Recordings(patient=patient, time_ms=time_ms, heartrate_centi=np.rint(heartrate * 100).astype(np.int64))

