"""What the command line accepts before anything touches the lakehouse: the argument types
(a bad value is a usage error, exit code 2, reported with the command's usage line) and the
registration every subcommand shares."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from lakehouse_assets.settings import LANDING_DIR

# ASCII only: \w would also accept letters of any script, which then name folders on disk.
# A leading letter keeps names clear of "_checkpoints", "_schemas", "." and "..".
_PART = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}", re.ASCII)
TABLE_EXAMPLE = "silver.recordings_enriched"
_N = TypeVar("_N", int, float)
_RAW = argparse.RawDescriptionHelpFormatter  # descriptions keep their lines and examples


@dataclass(frozen=True)
class TableName:
    """A validated ``layer.name``: both parts are safe single path segments."""

    layer: str
    name: str

    def __str__(self) -> str:
        return f"{self.layer}.{self.name}"


def add_command(subparsers: Any, name: str, parents: list[argparse.ArgumentParser],
                run: Callable[..., int] | None, summary: str, description: str, *, spark: bool = False,
                table: Literal[None, "TABLE", "TABLE?"] = None, json: bool = False,
                limit: tuple[int, str] | None = None) -> argparse.ArgumentParser:
    """Register the subcommand ``name``, run by ``run`` (which gets a Spark session when
    ``spark``), with the arguments many commands share: a TABLE (``"TABLE?"``: optional),
    ``--json``, and ``--limit N`` given its default and help."""
    parser: argparse.ArgumentParser = subparsers.add_parser(name, parents=parents, help=summary,
                                                            description=description, formatter_class=_RAW)
    if table:
        parser.add_argument("table", metavar="TABLE", type=table_name, nargs="?" if table == "TABLE?" else None,
                            help=f"the table as layer.name, e.g. {TABLE_EXAMPLE}")
    if limit:
        parser.add_argument("--limit", type=positive_int, default=limit[0], metavar="N",
                            help=f"{limit[1]} (default {limit[0]})")
    if json:
        parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    if run:
        parser.set_defaults(run=run, spark=spark)
    return parser


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
    return _number(text, int, "a whole number", lambda v: v >= 1, "at least 1")


def non_negative_int(text: str) -> int:
    """A whole number >= 0."""
    return _number(text, int, "a whole number", lambda v: v >= 0, "at least 0")


def rate(text: str) -> float:
    """A share in [0, 1], e.g. 0.01 for one record in a hundred."""
    return _number(text, float, "a number", lambda v: 0 <= v <= 1, "between 0 and 1, e.g. 0.01")


def seconds(text: str) -> float:
    """A finite, non-negative number of seconds."""
    return _number(text, float, "a number of seconds", lambda v: v >= 0, "at least 0")


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0."""
    return _number(text, float, "a number of seconds", lambda v: v > 0, "more than 0")


def _number(text: str, kind: Callable[[str], _N], what: str, ok: Callable[[_N], bool], bounds: str) -> _N:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not (math.isfinite(value) and ok(value)):
        raise argparse.ArgumentTypeError(f"{text!r} must be {bounds}")
    return value
