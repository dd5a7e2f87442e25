"""Evaluating a contract on a DataFrame: how many rows fail each rule, and which.

Every row rule's failures are counted in one Spark aggregation (``sum(when(failed, 1))``
per rule, a single pass over the data); a second job, run only when something failed,
fetches up to ``sample_size`` failing rows per rule. Unique keys cost one grouping each.
Pandera checks the structure without reading data. Nothing is collected but counts and
samples.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_assets.quality.contract import Contract, StructureError
from lakehouse_assets.quality.expectations import count_failures
from lakehouse_assets.quality.rules import Rule, Severity, UniqueKey

DEFAULT_SAMPLE_SIZE = 10
_RULE = "__rule"
_ROW = "__row"
_COUNT = "__count"
_CELL_WIDTH = 60


@dataclass(frozen=True)
class RuleResult:
    """What one rule found: ``failing_rows`` of the rows checked, and a sample of them.

    ``missing_columns`` lists the columns the rule reads that the data lacks; such a rule
    is not evaluated and counts as failed (the structure check says why)."""

    name: str
    description: str
    severity: Severity
    failing_rows: int
    sample_columns: tuple[str, ...] = ()
    sample: tuple[tuple[Any, ...], ...] = ()
    missing_columns: tuple[str, ...] = ()
    duplicate_keys: int | None = None  # unique keys only: how many key values repeat

    @property
    def passed(self) -> bool:
        return self.failing_rows == 0 and not self.missing_columns

    def sample_markdown(self) -> str:
        """The sample as a Markdown table (empty string when there is none)."""
        return markdown_table(self.sample_columns, self.sample)


@dataclass(frozen=True)
class Evaluation:
    """A contract evaluated on some rows of its table."""

    table: str
    rows_checked: int
    results: Mapping[str, RuleResult] = field(default_factory=dict)
    structure_errors: tuple[StructureError, ...] = ()

    @property
    def structure_passed(self) -> bool:
        return not self.structure_errors

    @property
    def failing_counts(self) -> dict[str, int]:
        """Failing rows per rule, by rule name."""
        return {name: r.failing_rows for name, r in self.results.items()}


def evaluate(contract: Contract, df: DataFrame, *, sample_size: int = DEFAULT_SAMPLE_SIZE) -> Evaluation:
    """Evaluate ``contract`` on ``df`` (a batch DataFrame): Pandera's structure errors, and
    for each rule the failing rows and a sample of at most ``sample_size`` of them."""
    structure = tuple(contract.structure_errors(df))
    available = {c.lower() for c in df.columns}
    results: dict[str, RuleResult] = {}
    runnable: list[Rule] = []
    for rule in contract.rules:
        missing = tuple(c for c in rule.columns if c.lower() not in available)
        if missing:
            results[rule.name] = RuleResult(rule.name, rule.description, rule.severity, 0, missing_columns=missing)
        else:
            runnable.append(rule)

    rows, failing = count_failures(df, runnable)
    samples = sample_failures(df, [r for r in runnable if failing[r.name]], sample_size)
    columns = tuple(df.columns)
    for rule in runnable:
        results[rule.name] = RuleResult(
            rule.name, rule.description, rule.severity, failing[rule.name],
            sample_columns=columns, sample=tuple(samples.get(rule.name, ())),
        )
    for key in contract.unique:
        missing = tuple(c for c in key.columns if c.lower() not in available)
        if missing:
            results[key.name] = RuleResult(key.name, key.description, key.severity, 0, missing_columns=missing)
        else:
            results[key.name] = _duplicates(df, key, sample_size)
    checked: list[Rule | UniqueKey] = [*contract.rules, *contract.unique]
    ordered = {r.name: results[r.name] for r in checked}
    return Evaluation(contract.table, rows, ordered, structure)


def sample_failures(df: DataFrame, rules: Sequence[Rule], sample_size: int) -> dict[str, list[tuple[Any, ...]]]:
    """Up to ``sample_size`` failing rows of each rule, all rules in one Spark job: each
    failing row is tagged with the rules it fails, and the first rows per rule are kept."""
    if not rules or sample_size <= 0:
        return {}
    columns = [F.col(f"`{c}`") for c in df.columns]
    tags = F.array_compact(F.array(*[F.when(rule.failed(), F.lit(rule.name)) for rule in rules]))
    tagged = (
        df.select(*columns, tags.alias(_RULE))
        .where(F.size(F.col(_RULE)) > 0)
        .select(*columns, F.explode(F.col(_RULE)).alias(_RULE))
    )
    # Any order will do for a sample; the window only needs one to number the rows.
    numbered = tagged.withColumn(_ROW, F.row_number().over(Window.partitionBy(_RULE).orderBy(F.lit(0))))
    samples: dict[str, list[tuple[Any, ...]]] = {}
    for row in numbered.where(F.col(_ROW) <= sample_size).collect():
        values = row.asDict(recursive=True)
        samples.setdefault(values[_RULE], []).append(tuple(values[c] for c in df.columns))
    return samples


def _duplicates(df: DataFrame, key: UniqueKey, sample_size: int) -> RuleResult:
    """Rows whose key another row shares, how many key values repeat, and the most
    repeated keys as the sample."""
    columns = [F.col(f"`{c}`") for c in key.columns]
    repeated = df.groupBy(*columns).agg(F.count(F.lit(1)).alias(_COUNT)).where(F.col(_COUNT) > 1)
    totals = repeated.agg(F.count(F.lit(1)).alias("keys"), F.sum(_COUNT).alias("rows")).first()
    assert totals is not None
    keys, rows = int(totals["keys"] or 0), int(totals["rows"] or 0)
    sample: tuple[tuple[Any, ...], ...] = ()
    if rows:
        top = repeated.orderBy(F.col(_COUNT).desc()).limit(sample_size).collect()
        sample = tuple(tuple(r[c] for c in key.columns) + (r[_COUNT],) for r in top)
    return RuleResult(
        key.name, key.description, key.severity, rows,
        sample_columns=(*key.columns, "rows"), sample=sample, duplicate_keys=keys,
    )


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """``rows`` as a Markdown table under ``columns``; long values are cut short."""
    if not rows:
        return ""
    lines = [
        "| " + " | ".join(_cell(c) for c in columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        text = "null"
    elif isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    else:
        text = str(value)
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    return text if len(text) <= _CELL_WIDTH else text[: _CELL_WIDTH - 1] + "…"


__all__ = [
    "DEFAULT_SAMPLE_SIZE",
    "Evaluation",
    "RuleResult",
    "evaluate",
    "markdown_table",
    "sample_failures",
]
