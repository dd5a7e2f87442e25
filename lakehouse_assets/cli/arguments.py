"""Argument types: what the command line accepts before anything touches the lakehouse.

Each type raises :class:`argparse.ArgumentTypeError`, so a bad value is a usage error (exit
code 2) reported by argparse with the command's usage line.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass

from lakehouse_assets.settings import LANDING_DIR

# ASCII only: \w would also accept letters of any script, which then name folders on disk.
# A leading letter keeps names clear of "_checkpoints", "_schemas", "." and "..".
_PART = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}", re.ASCII)
TABLE_EXAMPLE = "silver.recordings_enriched"


@dataclass(frozen=True)
class TableName:
    """A validated ``layer.name``: both parts are safe single path segments."""

    layer: str
    name: str

    def __str__(self) -> str:
        return f"{self.layer}.{self.name}"


def table_name(text: str) -> TableName:
    """Parse TABLE (``layer.name``). Refuses anything that could name a path outside the
    lakehouse root, the landing folder, or the machinery's own ``_`` folders."""
    parts = text.split(".")
    if len(parts) != 2:
        what = "has no table name" if len(parts) == 1 else f"has {len(parts) - 1} dots"
        raise argparse.ArgumentTypeError(
            f"invalid TABLE {text!r}: it {what}; give layer.name, e.g. {TABLE_EXAMPLE}")
    layer, name = parts
    for role, part in (("layer", layer), ("table name", name)):
        if not _PART.fullmatch(part):
            raise argparse.ArgumentTypeError(
                f"invalid TABLE {text!r}: the {role} {part!r} must start with a letter and hold "
                f"only letters, digits and underscores (at most 128), e.g. {TABLE_EXAMPLE}")
    if layer == LANDING_DIR:
        raise argparse.ArgumentTypeError(
            f"invalid TABLE {text!r}: '{LANDING_DIR}' holds landed files, not tables; "
            "see them with `lakehouse status`")
    return TableName(layer, name)


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """A whole number >= 0."""
    return _int_at_least(text, 0)


def rate(text: str) -> float:
    """A share in [0, 1], e.g. 0.01 for one record in a hundred."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a share such as 0.01") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 1; give a share such as 0.01")
    return value


def seconds(text: str) -> float:
    """A finite, non-negative number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds >= 0")
    return value


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least {minimum}")
    return value
