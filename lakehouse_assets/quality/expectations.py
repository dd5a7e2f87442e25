"""Expectations on a table's write, batch by batch: each rule counted in one Spark aggregation,
a FAIL rule stopping the batch before anything is committed, and the counts committed with the
batch (``lakehouse.batch.expectations``) so a replayed batch is not counted twice and a run's
counts are read from the table's log, not from memory (docs/quality.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.errors import ExpectationFailedError, LakehouseError
from lakehouse_assets.quality.rules import Rule, Severity
from lakehouse_assets.storage import HistoryEntry
from lakehouse_assets.storage.batch_record import EXPECTATIONS_KEY as EXPECTATIONS_KEY
from lakehouse_assets.storage.sink import RunStamp, TableSink

_COUNT = "__count"
_ROW_TEXT_LIMIT = 500


@dataclass(frozen=True)
class ExpectationCounts:
    """Rows checked and, per rule name, how many of them failed (``failed``) and how many of
    those the batch wrote to its table (``kept``; None: not recorded, as before it was)."""

    rows: int = 0
    failed: Mapping[str, int] = field(default_factory=dict)
    kept: Mapping[str, int] | None = None

    def passed(self, rule: str) -> int:
        """Rows that passed ``rule``."""
        return self.rows - self.failed.get(rule, 0)

    def __add__(self, other: ExpectationCounts) -> ExpectationCounts:
        """Both counts; ``kept`` for the rules both recorded it for."""
        names = [*self.failed, *(n for n in other.failed if n not in self.failed)]
        failed = {n: self.failed.get(n, 0) + other.failed.get(n, 0) for n in names}
        mine, theirs = self.kept, other.kept
        kept = None if mine is None or theirs is None else {n: mine[n] + theirs[n] for n in mine if n in theirs}
        return ExpectationCounts(self.rows + other.rows, failed, kept)

    def to_json(self) -> str:
        data: dict[str, Any] = {"rows": self.rows, "failed": dict(self.failed)}
        if self.kept is not None:
            data["kept"] = dict(self.kept)
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ExpectationCounts:
        data = json.loads(text)
        kept = data.get("kept")
        return cls(int(data["rows"]), _ints(data["failed"]), None if kept is None else _ints(kept))


def enforce(
    df: DataFrame, rules: Sequence[Rule], table: str, *, dropped_by: Column | None = None
) -> ExpectationCounts:
    """Count ``rules`` on ``df`` (a batch; ``dropped_by`` as for :func:`enforce_counting`), and
    raise :class:`ExpectationFailedError` when a FAIL rule has failing rows, naming ``table``
    and one of them."""
    return enforce_counting(df, rules, table, dropped_by=dropped_by)[0]


def enforce_counting(
    df: DataFrame, rules: Sequence[Rule], table: str, *, dropped_by: Column | None = None,
    also: Mapping[str, Column] | None = None,
) -> tuple[ExpectationCounts, dict[str, int]]:
    """:func:`enforce`, also giving the rows each condition of ``also`` holds for, all in one
    Spark job: the rows of ``df`` and, per rule, how many fail it and how many of those are
    kept. On rows already routed, ``dropped_by`` is each row's array of the reasons it was
    dropped for (empty: the row is written): an ERROR rule fails where that array names it,
    and a row is kept where it is empty. Without it every row is kept."""
    available = {c.lower() for c in df.columns}
    for rule in rules:
        missing = [c for c in rule.columns if c.lower() not in available]
        if missing:
            raise LakehouseError(
                f"Expectation {rule.name} of {table} reads {missing}, which the rows to write lack "
                f"(they have {df.columns}); fix the rule's columns or the query")
    kept = F.size(dropped_by) == 0 if dropped_by is not None else F.lit(True)
    sums = {f"__fail_{i}": _fails(rule, dropped_by) for i, rule in enumerate(rules)}
    sums |= {f"__kept_{i}": _fails(rule, dropped_by) & kept for i, rule in enumerate(rules)}
    sums |= {f"__also_{i}": condition for i, condition in enumerate((also or {}).values())}
    row = df.agg(F.count(F.lit(1)).alias(_COUNT),
                 *[F.sum(F.when(condition, 1).otherwise(0)).alias(name) for name, condition in sums.items()]).first()
    assert row is not None  # a global aggregation always returns one row
    counts = ExpectationCounts(int(row[_COUNT]), {r.name: int(row[f"__fail_{i}"] or 0) for i, r in enumerate(rules)},
                               {r.name: int(row[f"__kept_{i}"] or 0) for i, r in enumerate(rules)})
    for rule in rules:
        if rule.severity is Severity.FAIL and counts.failed[rule.name]:
            raise ExpectationFailedError(
                rule.name, table, rule.description, failing_row(df, rule), counts.failed[rule.name])
    return counts, {name: int(row[f"__also_{i}"] or 0) for i, name in enumerate(also or {})}


def failing_row(df: DataFrame, rule: Rule) -> str:
    """One row of ``df`` that fails ``rule``, as one line of JSON (cut short if long)."""
    found = df.where(rule.failed()).limit(1).collect()
    if not found:
        return "(no failing row found again)"
    text = json.dumps(found[0].asDict(recursive=True), default=str, separators=(", ", ": "))
    return text if len(text) <= _ROW_TEXT_LIMIT else text[: _ROW_TEXT_LIMIT - 1] + "…"


def counts_of_commits(commits: Iterable[HistoryEntry]) -> ExpectationCounts:
    """The expectation counts of ``commits``, summed (commits without any count nothing)."""
    recorded = [ExpectationCounts.from_json(str(c.custom_metadata[EXPECTATIONS_KEY]))
                for c in commits if c.custom_metadata.get(EXPECTATIONS_KEY)]
    return sum(recorded[1:], recorded[0]) if recorded else ExpectationCounts()


def commit_metadata(counts: ExpectationCounts) -> dict[str, str]:
    """The commit metadata that records ``counts`` with a batch."""
    return {EXPECTATIONS_KEY: counts.to_json()}


@dataclass
class ExpectationsSink:
    """A ``foreachBatch`` function: enforce ``rules`` on each micro-batch, then write it with
    ``sink`` (a :class:`~lakehouse_assets.storage.DeltaSink` or one built on it), the counts
    in its commit.

    WARN and FAIL rules only: an ERROR rule drops rows into a quarantine, which
    :class:`~lakehouse_assets.quality.quarantine.QuarantineSink` writes.
    """

    sink: TableSink
    rules: Sequence[Rule]
    table: str

    def __post_init__(self) -> None:
        dropping = [r.name for r in self.rules if r.severity is Severity.ERROR]
        if dropping:
            raise ValueError(f"{self.table}: rules {dropping} drop rows, which needs a quarantine table")

    @property
    def output_mode(self) -> str:
        return self.sink.output_mode

    def for_run(self, stamp: RunStamp) -> ExpectationsSink:
        """This sink, recording ``stamp`` in its commits."""
        return ExpectationsSink(self.sink.for_run(stamp), self.rules, self.table)

    def run_commits(self) -> list[HistoryEntry]:
        """What this sink's run committed, from the table's log."""
        return self.sink.run_commits()

    def __call__(self, batch_df: DataFrame, batch_id: int) -> Any:
        batch_df.persist()  # counted, then written: computed once
        try:
            counts = enforce(batch_df, self.rules, self.table)
            return self.sink(batch_df, batch_id, commit_metadata=commit_metadata(counts))
        finally:
            batch_df.unpersist()


def expecting(sink: TableSink, rules: Sequence[Rule], table: str) -> TableSink | ExpectationsSink:
    """``sink``, enforcing ``rules`` on each batch when there are any."""
    return ExpectationsSink(sink, rules, table) if rules else sink


def _fails(rule: Rule, dropped_by: Column | None) -> Column:
    if dropped_by is not None and rule.severity is Severity.ERROR:
        return F.array_contains(dropped_by, F.lit(rule.name))
    return rule.failed()


def _ints(counts: Mapping[str, Any]) -> dict[str, int]:
    return {str(k): int(v) for k, v in counts.items()}

