"""Expectations in the stream, made lossless: each row goes to the table or, with the names of
the ERROR rules it failed in ``_quarantine_reason``, to the quarantine. The reason is computed
once per row and the outputs split on it, so rows in = rows passed + rows quarantined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.quality.duplicates import DUPLICATE, DUPLICATES_KEY, mark_duplicates
from lakehouse_assets.quality.expectations import commit_metadata, enforce_counting
from lakehouse_assets.quality.rules import Rule, Severity
from lakehouse_assets.storage import DeltaSink, HistoryEntry
from lakehouse_assets.storage.sink import RunStamp

# The column that says which rules a quarantined row failed.
QUARANTINE_REASON = "_quarantine_reason"

REASON_SEPARATOR = ","

ColumnLike = str | Column


def routing_rules(rules: Sequence[Rule]) -> tuple[Rule, ...]:
    """The rules that decide where a row goes: the ERROR ones."""
    return tuple(r for r in rules if r.severity is Severity.ERROR)


def quarantine_reason(rules: Sequence[Rule]) -> Column:
    """The names of the ERROR rules a row fails, comma-separated in the rules' order, or
    NULL when it fails none (WARN rules are ignored)."""
    routing = routing_rules(rules)
    if not routing:
        return F.lit(None).cast("string")
    failed = F.concat_ws(REASON_SEPARATOR, *[F.when(rule.failed(), F.lit(rule.name)) for rule in routing])
    # concat_ws skips the nulls of passing rules, leaving "" when every rule passed.
    return F.when(failed != F.lit(""), failed)


def route(df: DataFrame, rules: Sequence[Rule]) -> DataFrame:
    """``df`` with ``_quarantine_reason`` added: the one place the routing is decided.

    In a streaming query, compute this before ``foreachBatch`` (as
    :class:`QuarantineSink` expects): Spark then fixes ``current_timestamp()`` (read by
    ``time_plausible``) once per micro-batch, and both outputs of a batch see one reason.
    """
    missing = sorted(
        {c for r in routing_rules(rules) for c in r.columns if c.lower() not in {x.lower() for x in df.columns}}
    )
    if missing:
        raise LakehouseError(
            f"Cannot route rows: the routing rules read columns {missing} that the DataFrame lacks "
            f"(it has {df.columns}). Select the bronze columns and the joined patient name first."
        )
    if QUARANTINE_REASON in df.columns:
        raise LakehouseError(
            f"The DataFrame already has a {QUARANTINE_REASON} column; route each row only once"
        )
    return df.withColumn(QUARANTINE_REASON, quarantine_reason(rules))


def split_routed(
    routed: DataFrame, *, passed_columns: Sequence[ColumnLike] | None, quarantine_columns: Sequence[ColumnLike] | None
) -> tuple[DataFrame, DataFrame]:
    """Split a :func:`route`-d DataFrame on its reason: the passed rows projected on
    ``passed_columns``, and the quarantined rows on ``quarantine_columns`` plus
    ``_quarantine_reason`` (None: every column the rows have, as an ingestion whose columns
    evolve)."""
    if QUARANTINE_REASON not in routed.columns:
        raise LakehouseError(f"split_routed needs the {QUARANTINE_REASON} column that route() adds")
    reason = F.col(QUARANTINE_REASON)
    rows = [c for c in routed.columns if c != QUARANTINE_REASON]
    passed = routed.where(reason.isNull()).select(*_columns(rows if passed_columns is None else passed_columns))
    quarantined = routed.where(reason.isNotNull()).select(
        *_columns(rows if quarantine_columns is None else quarantine_columns), reason)
    return passed, quarantined


def dropped_by() -> Column:
    """Per routed row, the reasons it was sent to quarantine: the names of the ERROR rules it
    failed, or ``duplicate`` (an array, empty for a row that passed)."""
    reason = F.col(QUARANTINE_REASON)
    return F.when(reason.isNull(), F.array().cast("array<string>")).otherwise(F.split(reason, REASON_SEPARATOR))


@dataclass
class QuarantineSink:
    """A ``foreachBatch`` function that writes each routed micro-batch to two tables.

    ``passed`` and ``quarantine`` are :class:`~lakehouse_assets.storage.DeltaSink` s
    (exactly-once by query id and batch id, so a replayed batch is skipped by each table on
    its own). The streaming DataFrame must already carry ``_quarantine_reason``
    (:func:`route`). The batch is cached while both writes read it, so the source and the
    join are computed once.

    With ``unique_by``, a passing row whose values of those columns the passed table already
    holds (or an earlier row of the batch) goes to quarantine as a ``duplicate``
    (:mod:`~lakehouse_assets.quality.duplicates`). Before either write, ``rules`` are
    enforced as expectations of ``table``
    (:func:`~lakehouse_assets.quality.expectations.enforce`), and the duplicates counted, in
    one Spark job: a FAIL rule's failure stops the batch with nothing committed, and every
    rule's counts (of the rows read, and of the failing rows the table keeps) and the
    duplicates go into the passed table's commit.

    It looks like a DeltaSink to :func:`~lakehouse_assets.streaming.run_stream`:
    ``output_mode`` and ``run_commits`` are the passed table's; ``quarantine.run_commits()``
    reports the other table.
    """

    passed: DeltaSink
    quarantine: DeltaSink
    passed_columns: Sequence[ColumnLike] | None
    quarantine_columns: Sequence[ColumnLike] | None
    rules: Sequence[Rule] = ()
    table: str = ""
    output_mode: str = "append"
    unique_by: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.output_mode != "append":
            raise LakehouseError(
                "QuarantineSink routes rows of an append stream; a complete or update stream "
                "rewrites rows, and rewriting quarantined rows would lose their history"
            )

    def for_run(self, stamp: RunStamp) -> QuarantineSink:
        """This sink, recording ``stamp`` in the commits of both tables."""
        return replace(self, passed=self.passed.for_run(stamp), quarantine=self.quarantine.for_run(stamp))

    def run_commits(self) -> list[HistoryEntry]:
        """The passed table's commits of this run (what the run reports as rows written)."""
        return self.passed.run_commits()

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        batch_df.persist()
        routed = batch_df
        try:
            if self.unique_by:
                routed = mark_duplicates(batch_df, QUARANTINE_REASON, self.unique_by, self._held(batch_df)).persist()
            duplicates = {DUPLICATES_KEY: F.col(QUARANTINE_REASON) == DUPLICATE} if self.unique_by else {}
            metadata: dict[str, str] = {}
            if self.rules or duplicates:
                counts, counted = enforce_counting(routed, self.rules, self.table or self.passed.path,
                                                   dropped_by=dropped_by(), also=duplicates)
                metadata = {**(commit_metadata(counts) if self.rules else {}),
                            **{key: str(n) for key, n in counted.items()}}
            passed, quarantined = split_routed(
                routed, passed_columns=self.passed_columns, quarantine_columns=self.quarantine_columns
            )
            # Each writer skips a replayed batch its table already holds, so a run stopped
            # between the two writes completes both when the batch is replayed.
            self.quarantine(quarantined, batch_id)
            self.passed(passed, batch_id, commit_metadata=metadata or None)
        finally:
            if routed is not batch_df:
                routed.unpersist()
            batch_df.unpersist()

    def _held(self, batch_df: DataFrame) -> DataFrame | None:
        """The passed table's rows, or None before its first commit."""
        store, path = self.passed.store, self.passed.path
        return store.read(batch_df.sparkSession, path) if store.exists(path) else None


def _columns(columns: Sequence[ColumnLike]) -> list[Column]:
    if not columns:
        raise LakehouseError("Give the columns of each output: an empty projection would drop every value")
    return [F.col(f"`{c}`") if isinstance(c, str) else c for c in columns]

