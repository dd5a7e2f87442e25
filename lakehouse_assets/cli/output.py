"""How the commands print: aligned plain-text tables for people (not rich's boxes: piped to a
file or ``grep``, a row stays one line whatever the terminal's width), JSON in full for scripts."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

NULL = "NULL"
# Wider cells are cut with an ellipsis so one long value cannot push every row off screen.
MAX_CELL_WIDTH = 60
_COLUMN_GAP = "  "


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
                 right_align: Collection[str] = (), max_cell_width: int = MAX_CELL_WIDTH) -> str:
    """Rows under a header and a rule, columns aligned. Number columns, and the columns
    named in ``right_align`` (numbers already formatted as text), are right-aligned."""
    cells = [[format_value(value, max_width=max_cell_width) for value in row] for row in rows]
    widths = [len(name) for name in columns]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    numeric = [name in right_align or _is_numeric_column(rows, i) for i, name in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        padded = (value.rjust(widths[i]) if numeric[i] else value.ljust(widths[i])
                  for i, value in enumerate(values))
        return _COLUMN_GAP.join(padded).rstrip()

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def format_value(value: Any, *, max_width: int | None = MAX_CELL_WIDTH) -> str:
    """One value as a table cell: NULL for missing, readable times, control characters escaped."""
    text = _plain(value)
    if max_width is not None and len(text) > max_width:
        text = text[: max_width - 1] + "…"
    return text


def format_time(value: dt.datetime | None) -> str:
    """A point in time, to the second; UTC ones say so."""
    if value is None:
        return NULL
    if value.tzinfo is not None and value.utcoffset() == dt.timedelta(0):
        return value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
    return value.isoformat(sep=" ", timespec="seconds")


def format_count(value: int | None) -> str:
    """A count with thousands separators (unknown counts show as '?')."""
    return "?" if value is None else f"{value:,}"


def or_dash(value: Any) -> Any:
    """``value``, or "-" for none: in reports "-" means "none" (NULL is a missing value in table data)."""
    return "-" if value is None else value


def to_json(document: Any) -> str:
    """``document`` as indented JSON; times as ISO 8601, decimals as strings (no precision
    lost), bytes as base64."""
    return json.dumps(document, indent=2, default=_json_default, ensure_ascii=False)


def print_json(document: Any) -> None:
    """Print :func:`to_json` of ``document``."""
    print(to_json(document))


def _plain(value: Any) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        if value.microsecond and value.tzinfo is None:
            return value.isoformat(sep=" ")
        if value.microsecond:
            return value.astimezone(dt.UTC).isoformat(sep=" ").replace("+00:00", " UTC")
        return format_time(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "0x" + bytes(value).hex()
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value, default=_json_default, ensure_ascii=False, separators=(", ", ": "))
    text = str(value)
    # A newline or tab inside a value would break the row apart.
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _is_numeric_column(rows: Sequence[Sequence[Any]], index: int) -> bool:
    values = [row[index] for row in rows if row[index] is not None]
    return bool(values) and all(
        isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool) for v in values)


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.time)):  # datetimes too
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
