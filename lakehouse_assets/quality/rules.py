"""Row rules: a named condition on a row, written once as a Spark ``Column``, TRUE when a row
passes. The same rule is an expectation on a table's writes and an asset check on the table, so
the two cannot disagree. Conditions are built when asked for, never at import: a ``Column``
needs a running SparkSession, and Dagster imports definitions without one.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

_NAME = re.compile(r"[a-z][a-z0-9_]*")


class Severity(StrEnum):
    """What a row failing the rule does as an expectation on a table's write (Lakeflow's
    ``expect``, ``expect_or_drop``, ``expect_or_fail``; see docs/quality.md): WARN keeps and
    counts it, ERROR drops it into the table's quarantine, FAIL fails the update. As an asset
    check, ERROR and FAIL rules fail as errors, WARN rules as warnings."""

    ERROR = "ERROR"
    WARN = "WARN"
    FAIL = "FAIL"

    @property
    def on_violation(self) -> str:
        """What a violation does, in Lakeflow's words: warn, drop row, fail update."""
        return {"WARN": "warn", "ERROR": "drop row", "FAIL": "fail update"}[self.value]


@dataclass(frozen=True)
class Rule:
    """A row-level rule: ``name`` (also the asset check's name), what it means, how much it
    matters, the columns it reads, and how to build its condition.

    ``build`` returns a Column that is TRUE for a passing row and may be NULL; the rule
    treats NULL as failing (see :meth:`condition`), so a null in a column the rule reads
    fails it unless ``build`` says otherwise (``col.isNull() | ...``).
    """

    name: str
    description: str
    severity: Severity
    columns: tuple[str, ...]
    build: Callable[[], Column]

    def __post_init__(self) -> None:
        _check_named("Rule", self.name, self.columns)

    def condition(self) -> Column:
        """TRUE when a row passes, FALSE otherwise: never NULL."""
        return F.coalesce(self.build(), F.lit(False))

    def failed(self) -> Column:
        """TRUE when a row fails: never NULL."""
        return ~self.condition()

    def with_severity(self, severity: Severity) -> Rule:
        """The same rule (name, condition) with another severity, e.g. a WARN at bronze of
        what quarantines a row at silver."""
        return replace(self, severity=severity)


@dataclass(frozen=True)
class UniqueKey:
    """A table-level rule: no two rows share the values of ``columns`` (nulls compare equal,
    as GROUP BY groups them)."""

    name: str
    description: str
    columns: tuple[str, ...]
    severity: Severity = Severity.ERROR

    def __post_init__(self) -> None:
        _check_named("Unique key", self.name, self.columns)


def _check_named(kind: str, name: str, columns: tuple[str, ...]) -> None:
    if not _NAME.fullmatch(name):
        raise ValueError(f"{kind} name {name!r} is not usable as an asset check name: use lower-case "
                         "letters, digits and underscores, starting with a letter")
    if not columns:
        raise ValueError(f"{kind} {name!r} must name the columns it reads")


# -- factories ------------------------------------------------------------------------------


def not_null(column: str, *, name: str | None = None, severity: Severity = Severity.ERROR,
             description: str | None = None) -> Rule:
    """``column`` has a value."""
    return Rule(
        name or f"{column.lstrip('_')}_present",
        description or f"{column} is not null",
        severity,
        (column,),
        lambda: F.col(column).isNotNull(),
    )


def null_or_empty(column: str, *, name: str, severity: Severity = Severity.ERROR,
                  description: str | None = None) -> Rule:
    """``column`` is null, blank, or an empty JSON object (``{}``): nothing was put there."""

    def build() -> Column:
        text = F.trim(F.col(column).cast(T.StringType()))
        return F.col(column).isNull() | text.isin("", "{}")

    return Rule(name, description or f"{column} is null or empty", severity, (column,), build)


def number(column: str) -> Column:
    """``column`` as a double, null when it is not a number.

    Comparing a column of another type with a number makes Spark cast it, and under ANSI
    mode (Spark 4's default) a value that does not parse fails the whole query: a quality
    rule must judge bad data, never crash on it. (Bronze's types are inferred, so a
    numeric field can arrive as a string column.)
    """
    return F.col(column).try_cast(T.DoubleType())


def greater_than(column: str, bound: float, *, name: str, severity: Severity = Severity.ERROR,
                 description: str | None = None) -> Rule:
    """``column > bound`` (a null, or a value that is not a number, fails)."""
    return Rule(name, description or f"{column} > {bound:g}", severity, (column,),
                lambda: number(column) > F.lit(float(bound)))


def at_most(column: str, bound: float, *, name: str, severity: Severity = Severity.ERROR,
            description: str | None = None) -> Rule:
    """``column <= bound`` (a null, or a value that is not a number, fails)."""
    return Rule(name, description or f"{column} <= {bound:g}", severity, (column,),
                lambda: number(column) <= F.lit(float(bound)))


def in_range(column: str, low: float, high: float, *, name: str, severity: Severity = Severity.ERROR,
             description: str | None = None) -> Rule:
    """``low < column <= high`` (a null, or a value that is not a number, fails)."""
    return Rule(name, description or f"{column} in ({low:g}, {high:g}]", severity, (column,),
                lambda: (number(column) > F.lit(float(low))) & (number(column) <= F.lit(float(high))))


def plausible_time(column: str, *, earliest: dt.datetime, future_tolerance: dt.timedelta,
                   name: str, severity: Severity = Severity.ERROR,
                   description: str | None = None) -> Rule:
    """``column`` is a time between ``earliest`` and now plus ``future_tolerance``.

    The column may be a timestamp or a number of Unix seconds (bronze keeps the landed
    seconds, silver a timestamp): both are read as a timestamp, so one rule serves both.
    "Now" is Spark's ``current_timestamp()``, which a streaming query fixes per
    micro-batch, so every row of a batch is judged against the same clock.
    """
    earliest_utc = earliest if earliest.tzinfo else earliest.replace(tzinfo=dt.UTC)
    tolerance_seconds = int(future_tolerance.total_seconds())

    def build() -> Column:
        # try_cast: a value that is no time at all is null, and so fails, instead of failing
        # the query under ANSI mode.
        time = F.col(column).try_cast(T.TimestampType())
        latest = F.current_timestamp() + F.make_interval(secs=F.lit(tolerance_seconds))
        return (time >= F.lit(earliest_utc)) & (time <= latest)

    return Rule(
        name,
        description or f"{column} between {earliest_utc:%Y-%m-%d} and now + {future_tolerance}",
        severity,
        (column,),
        build,
    )


def sql_rule(name: str, condition: str, *, columns: Sequence[str], severity: Severity = Severity.WARN,
             description: str | None = None) -> Rule:
    """A rule whose condition is a Spark SQL expression (a SQL ``CONSTRAINT ... EXPECT``),
    reading ``columns``."""
    return Rule(name, description or condition, severity, tuple(columns), lambda: F.expr(condition))


def rules_reading(rules: Sequence[Rule], columns: Sequence[str]) -> tuple[Rule, ...]:
    """The rules whose columns are all among ``columns`` (names compared case-insensitively,
    as Spark resolves them)."""
    available = {c.lower() for c in columns}
    return tuple(r for r in rules if all(c.lower() in available for c in r.columns))

