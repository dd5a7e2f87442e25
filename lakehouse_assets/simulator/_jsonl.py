"""The text of recording lines, printed from integers (milliseconds, hundredths of a bpm) with
fixed decimals, so the text is exact and a bad record reads exactly like the good record it
replaces. The bulk path avoids per-record work: heads are built per patient, decimals come from tables.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_MILLIS = tuple(f"{i:03d}" for i in range(1000))
_HUNDREDTHS = tuple(f"{i:02d}" for i in range(100))


def time_text(time_ms: int) -> str:
    """Unix milliseconds as JSON seconds with three decimals, e.g. ``1577836800.120``."""
    seconds, millis = divmod(time_ms, 1000)
    return f"{seconds}.{_MILLIS[millis]}"


def heartrate_text(heartrate_centi: int) -> str:
    """Hundredths of a bpm as a JSON number with two decimals, e.g. ``72.50``."""
    sign = "-" if heartrate_centi < 0 else ""
    whole, hundredths = divmod(abs(heartrate_centi), 100)
    return f"{sign}{whole}.{_HUNDREDTHS[hundredths]}"


def record_head(device_id: int | str, mrn: int | str) -> str:
    """The start of a record's line, up to the time value; ``device_id`` and ``mrn`` are
    numbers or their JSON text."""
    return f'{{"device_id":{device_id},"mrn":{mrn},"time":'


def record_line(*, device_id: str, mrn: str, time: str, heartrate: str) -> str:
    """One record's JSON line (no newline) from the JSON text of each value."""
    return f'{record_head(device_id, mrn)}{time},"heartrate":{heartrate}}}'


def record_lines(*, heads: Sequence[str], time_ms: np.ndarray,
                 heartrate_centi: np.ndarray) -> list[str]:
    """Each record's JSON line (no newline): the bulk twin of :func:`record_line` fed by
    :func:`record_head`, :func:`time_text` and :func:`heartrate_text`. Heart rates must be
    positive (the table lookup has no sign)."""
    seconds, millis = np.divmod(time_ms, 1000)
    whole, hundredths = np.divmod(heartrate_centi, 100)
    m, h = _MILLIS, _HUNDREDTHS
    return [f'{head}{s}.{m[ms]},"heartrate":{w}.{h[c]}}}'
            for head, s, ms, w, c in zip(heads, seconds.tolist(), millis.tolist(),
                                          whole.tolist(), hundredths.tolist(), strict=True)]
