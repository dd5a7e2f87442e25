"""Evaluating a contract on a table's rows: how many rows fail each rule, and which. A rule the
table's writes counted in their commits is reported from those counts; the other rules are
counted and sampled in one Spark query, and unique keys cost one grouping each. Nothing is
collected but counts and samples.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_assets.quality.contract import Contract, StructureError
from lakehouse_assets.quality.expectations import ExpectationCounts
from lakehouse_assets.quality.rules import Rule, Severity, UniqueKey

DEFAULT_SAMPLE_SIZE = 10
_RULE = "__rule"
_ROW = "__row"
_COUNT = "__count"
_CELL_WIDTH = 60


@dataclass(frozen=True)
class Judged:
    """What a table's writes counted of the rows they added: ``rows`` written, and the
    expectation ``counts`` of their batches (over every row the batches read, dropped ones
    included; ``counts.kept``, the failing rows written) for the rules ``counts.kept`` names."""

    rows: int
    counts: ExpectationCounts


@dataclass(frozen=True)
class RuleResult:
    """What one rule found: ``failing_rows`` of the ``rows_checked``, and a sample of them.

    ``missing_columns`` lists the columns the rule reads that the data lacks; such a rule
    is not evaluated and counts as failed (the structure check says why). A rule the writes
    judged (``judged_rows`` is set) was counted by them: of the ``judged_rows`` their batches
    read, ``judged_failing`` failed it, and ``failing_rows`` of those were written."""

    name: str
    description: str
    severity: Severity
    failing_rows: int
    rows_checked: int = 0
    sample_columns: tuple[str, ...] = ()
    sample: tuple[tuple[Any, ...], ...] = ()
    missing_columns: tuple[str, ...] = ()
    duplicate_keys: int | None = None  # unique keys only: how many key values repeat
    judged_rows: int | None = None
    judged_failing: int | None = None

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
    results: Mapping[str, RuleResult] = field(default_factory=dict)
    structure_errors: tuple[StructureError, ...] = ()


def evaluate(contract: Contract, df: DataFrame, *, sample_size: int = DEFAULT_SAMPLE_SIZE, rows: int | None = None,
             judged: Judged | None = None, whole_table: Callable[[], DataFrame] | None = None) -> Evaluation:
    """Evaluate ``contract`` on ``df`` (a batch DataFrame: the rows to check, ``rows`` of them
    if known): Pandera's structure errors, and for each rule the failing rows and a sample of
    at most ``sample_size`` of them. The rules ``judged`` counted are reported from its
    counts. Unique keys are checked on the whole table (``whole_table()``; default ``df``),
    and the other rules are counted there, in the same pass as the first key."""
    structure = tuple(contract.structure_errors(df))
    available = {c.lower() for c in df.columns}
    checked: list[Rule | UniqueKey] = [*contract.rules, *contract.unique]
    results = {r.name: RuleResult(r.name, r.description, r.severity, 0, missing_columns=missing) for r in checked
               if (missing := tuple(c for c in r.columns if c.lower() not in available))}
    rules = [r for r in contract.rules if r.name not in results]
    by_write = judged.counts if judged is not None else ExpectationCounts()
    kept = by_write.kept or {}
    counted = [r for r in rules if r.name in kept]
    scanned = [r for r in rules if r not in counted]
    keys = [k for k in contract.unique if k.name not in results]
    table = whole_table() if whole_table is not None and keys else df
    grouped = [_duplicates(table, key, scanned if i == 0 else (), sample_size) for i, key in enumerate(keys)]
    results |= {key.name: result for key, (result, _) in zip(keys, grouped, strict=True)}
    failing_written = [r for r in counted if kept[r.name]]
    if grouped:  # the scanned rules were counted with the first key: sample those that failed
        scan = grouped[0][1]
        found = failures(table, [*(r for r in scanned if scan.failed[r.name]), *failing_written], sample_size)
    else:
        found = failures(df, [*scanned, *failing_written], sample_size)
        scan = ExpectationCounts(rows if rows is not None else df.count() if scanned else 0,
                                 {r.name: found[r.name][0] if r.name in found else 0 for r in scanned})
    for rule in rules:
        written = rule in counted
        results[rule.name] = RuleResult(
            rule.name, rule.description, rule.severity, kept[rule.name] if written else scan.failed[rule.name],
            judged.rows if judged is not None and written else scan.rows, tuple(df.columns),
            found[rule.name][1] if rule.name in found else (), judged_rows=by_write.rows if written else None,
            judged_failing=by_write.failed.get(rule.name, 0) if written else None)
    return Evaluation(contract.table, {r.name: results[r.name] for r in checked}, structure)


def failures(df: DataFrame, rules: Sequence[Rule],
             sample_size: int) -> dict[str, tuple[int, tuple[tuple[Any, ...], ...]]]:
    """For each rule some row of ``df`` fails, how many rows fail it and up to
    ``sample_size`` of them, all rules in one Spark query: each failing row is tagged with the
    rules it fails, and per rule the tagged rows are counted and the first ones kept."""
    if not rules:
        return {}
    columns = [F.col(f"`{c}`") for c in df.columns]
    tags = F.array_compact(F.array(*[F.when(rule.failed(), F.lit(rule.name)) for rule in rules]))
    tagged = (
        df.select(*columns, tags.alias(_RULE))
        .where(F.size(F.col(_RULE)) > 0)
        .select(*columns, F.explode(F.col(_RULE)).alias(_RULE))
    )
    # Any order will do for a sample; the window only needs one to number the rows.
    per_rule = Window.partitionBy(_RULE)
    numbered = tagged.select(*columns, _RULE, F.row_number().over(per_rule.orderBy(F.lit(0))).alias(_ROW),
                             F.count(F.lit(1)).over(per_rule).alias(_COUNT))
    found: dict[str, tuple[int, tuple[tuple[Any, ...], ...]]] = {}
    for row in numbered.where(F.col(_ROW) <= max(sample_size, 1)).collect():
        values = row.asDict(recursive=True)
        count, sample = found.get(values[_RULE], (int(values[_COUNT]), ()))
        kept = (tuple(values[c] for c in df.columns),) if values[_ROW] <= sample_size else ()
        found[values[_RULE]] = (count, sample + kept)
    return found


def _duplicates(df: DataFrame, key: UniqueKey, rules: Sequence[Rule],
                sample_size: int) -> tuple[RuleResult, ExpectationCounts]:
    """Rows whose key another row shares, how many key values repeat, and the most repeated
    keys as the sample; and the failures of ``rules``, counted in the same grouping."""
    columns = [F.col(f"`{c}`") for c in key.columns]
    failures = [F.count(F.when(rule.failed(), 1)).alias(f"__fail_{i}") for i, rule in enumerate(rules)]
    grouped = df.groupBy(*columns).agg(F.count(F.lit(1)).alias(_COUNT), *failures)
    repeats = F.col(_COUNT) > 1
    totals = grouped.agg(F.sum(_COUNT).alias("all"), F.count(F.when(repeats, 1)).alias("keys"),
                         F.sum(F.when(repeats, F.col(_COUNT))).alias("rows"),
                         *[F.sum(f"__fail_{i}").alias(f"__fail_{i}") for i in range(len(rules))]).first()
    assert totals is not None
    keys, rows, checked = int(totals["keys"] or 0), int(totals["rows"] or 0), int(totals["all"] or 0)
    sample: tuple[tuple[Any, ...], ...] = ()
    if rows:
        top = grouped.where(repeats).orderBy(F.col(_COUNT).desc()).limit(sample_size).collect()
        sample = tuple(tuple(r[c] for c in key.columns) + (r[_COUNT],) for r in top)
    failed = {rule.name: int(totals[f"__fail_{i}"] or 0) for i, rule in enumerate(rules)}
    return RuleResult(key.name, key.description, key.severity, rows, checked, sample_columns=(*key.columns, "rows"),
                      sample=sample, duplicate_keys=keys), ExpectationCounts(checked, failed, failed)


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

