"""Independent random streams, one per purpose, keyed by ``(seed, purpose, *more)``: file 7 is
generated without files 1-6, and a change to how bad records are drawn never shifts the good ones.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class Stream(IntEnum):
    """What a random stream is used for. The numbers are part of the data set: never reuse one."""

    PATIENTS = 1
    FILE_RECORDS = 2
    FILE_BAD_RECORDS = 3


def rng(seed: int, stream: Stream, *more: int) -> np.random.Generator:
    """A generator for ``stream`` of the data set ``seed``, optionally for one file (``more``)."""
    return np.random.default_rng([seed, int(stream), *more])
