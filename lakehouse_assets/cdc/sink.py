"""Applies a change feed to an SCD table, one micro-batch at a time, exactly once (how, and
what it promises: docs/guides/cdc.md).

The batch's changes become the rows of the keys it changes, and one Delta ``MERGE INTO``
replaces those keys' rows, recording the batch's app transaction. A state table beside it
(``<table>/_cdc_state``) keeps what a late change is judged against; the table is committed
first and its state second, each recording the batch, so a replay after a crash between the two
skips the table and commits the state, computed from the state before the batch as the table was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.cdc.scd import (
    SEQ,
    TRUNCATE,
    change_events,
    column,
    missing_identity,
    scd1_effective,
    scd1_state_rows,
    scd1_table_rows,
    scd2_history,
    scd2_state_events,
    scd2_state_rows,
)
from lakehouse_assets.cdc.spec import AutoCdc
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.storage.declared_types import DeclaredTypes
from lakehouse_assets.storage.engine import AppTransaction, CommitResult, HistoryEntry
from lakehouse_assets.storage.layout import TableLayout
from lakehouse_assets.storage.sink import DeltaSink, RunStamp

if TYPE_CHECKING:
    from lakehouse_assets.storage.delta import DeltaTableStore

#: The folder, inside the table's folder, of the Delta table holding its state.
STATE_FOLDER = "_cdc_state"
#: Commit metadata key: the SCD type a commit applied changes as.
CDC_KEY = "lakehouse.autoCdc"


@dataclass(frozen=True)
class AutoCdcTable:
    """The table at ``path`` that keeps a change feed as ``spec`` says, and its state:
    :meth:`apply` applies one batch of change rows, once (by its app transaction)."""

    store: DeltaTableStore
    path: str
    spec: AutoCdc
    #: The properties and partition or clustering columns the table is created with (its
    #: state table has none).
    layout: TableLayout = field(default_factory=TableLayout)
    #: The column types its definition declares, which its rows are cast to.
    declared: DeclaredTypes | None = None

    @property
    def state_path(self) -> str:
        """Where the table keeps its state: per key (type 1), or every change (type 2)."""
        return f"{self.path.rstrip('/')}/{STATE_FOLDER}"

    def apply(self, changes: DataFrame, transaction: AppTransaction, metadata: Mapping[str, str]) -> CommitResult:
        """Apply the batch of change rows ``changes``, recording ``transaction`` and ``metadata``
        in the table's commit (and its state's); a batch the table holds is skipped."""
        committed = self.store.committed_batch(self.state_path, transaction.app_id)
        if committed is not None and committed >= transaction.batch_id:
            # The state is committed after the table: a batch it holds, both hold. A replay
            # after the run that committed both is skipped before any Spark work.
            return CommitResult(self.path, None, skipped=True)
        metadata = {**metadata, CDC_KEY: f"scd{self.spec.stored_as_scd_type}"}
        kept = self.spec.kept_columns(changes.columns)
        events = change_events(changes, self.spec).persist()
        try:
            self._refuse_unidentified(changes)
            if self.spec.stored_as_scd_type == 1:
                return self._apply_type_1(events, kept, transaction, metadata)
            return self._apply_type_2(events, kept, self.spec.tracked_columns(changes.columns), transaction, metadata)
        finally:
            events.unpersist()

    # -- type 1 -------------------------------------------------------------------------------
    def _apply_type_1(self, events: DataFrame, kept: Sequence[str], transaction: AppTransaction,
                      metadata: Mapping[str, str]) -> CommitResult:
        store, path, keys = self.store, self.path, list(self.spec.keys)
        spark = events.sparkSession
        truncated_at = None
        if self.spec.apply_as_truncates:
            truncated_at = events.filter(column(TRUNCATE)).agg(F.max(column(SEQ))).first()[0]  # type: ignore[index]
        state = _current_rows(store, spark, self.state_path)
        effective = scd1_effective(events, state, self.spec, truncated_at).persist()
        try:
            changed_keys = effective.select(*keys)
            # Skipped, before any Spark work, when the table holds the batch (the state did not).
            result = store.merge(scd1_table_rows(effective, kept), path, keys=keys, replacing=changed_keys,
                                 transaction=transaction, operation="AUTO CDC", metadata=metadata,
                                 layout=self.layout, declared=self.declared)
            fault_point("cdc.table_committed")
            store.merge(scd1_state_rows(effective, self.spec), self.state_path, keys=keys, replacing=changed_keys,
                        transaction=transaction, operation="AUTO CDC STATE", metadata=metadata)
            return result
        finally:
            effective.unpersist()

    # -- type 2 -------------------------------------------------------------------------------
    def _apply_type_2(self, events: DataFrame, kept: Sequence[str], tracked: Sequence[str],
                      transaction: AppTransaction, metadata: Mapping[str, str]) -> CommitResult:
        store, path, keys = self.store, self.path, list(self.spec.keys)
        spark = events.sparkSession
        changed_keys = events.select(*keys).distinct()
        state = _current_rows(store, spark, self.state_path)
        applied = None if state is None else scd2_state_events(state.join(changed_keys, keys, "left_semi"))
        # A change whose key and sequence were applied before is one seen twice.
        fresh = events.drop(TRUNCATE).dropDuplicates([*keys, SEQ])
        if applied is not None:
            fresh = fresh.join(applied.select(*keys, SEQ), [*keys, SEQ], "left_anti")
        fresh = fresh.persist()
        try:
            every_event = fresh if applied is None else applied.unionByName(fresh)
            # Skipped, before any Spark work, when the table holds the batch (the state did not).
            result = store.merge(scd2_history(every_event, self.spec, kept, tracked), path,
                                 keys=self.spec.row_identity, replacing=changed_keys, transaction=transaction,
                                 operation="AUTO CDC", metadata=metadata, layout=self.layout,
                                 declared=self.declared)
            fault_point("cdc.table_committed")
            store.write(scd2_state_rows(fresh), self.state_path, mode="append", transaction=transaction,
                        operation="AUTO CDC STATE", metadata=metadata)
            return result
        finally:
            fresh.unpersist()

    def _refuse_unidentified(self, changes: DataFrame) -> None:
        unidentified = changes.filter(missing_identity(self.spec)).limit(1).collect()
        if unidentified:
            row = unidentified[0].asDict()
            raise LakehouseError(
                f"AUTO CDC into {self.path}: a change has no value for its key {list(self.spec.keys)} or its "
                f"sequence column {self.spec.sequence_by!r}: {row}. Nothing of the batch was applied. Every change "
                "needs its keys and a sequence value: correct the change where it came from (its source file, "
                "when the row names one), then rebuild the feed's table and this one (run config "
                "full_refresh: true).")


@dataclass
class AutoCdcSink:
    """A ``foreachBatch`` function applying each micro-batch of changes to ``sink.path`` as
    ``spec`` says, with ``sink``'s exactly-once commit identity (query id, the run's stamp)."""

    sink: DeltaSink
    spec: AutoCdc

    @property
    def output_mode(self) -> str:
        return self.sink.output_mode

    @property
    def table(self) -> AutoCdcTable:
        """The table the batches are applied to, with its state."""
        return AutoCdcTable(self.sink.store, self.sink.path, self.spec, self.sink.layout, self.sink.declared)

    def for_run(self, stamp: RunStamp) -> AutoCdcSink:
        """This sink, recording ``stamp`` in its commits."""
        return replace(self, sink=self.sink.for_run(stamp))

    def run_commits(self) -> list[HistoryEntry]:
        """What this sink's run committed to the table (not its state), from the table's log."""
        return self.sink.run_commits()

    def __call__(self, batch_df: DataFrame, batch_id: int,
                 commit_metadata: Mapping[str, str] | None = None) -> CommitResult:
        """Apply the batch, once."""
        fault_point("batch.started")
        transaction, metadata = self.sink.batch_commit(batch_df, batch_id, commit_metadata)
        return self.table.apply(batch_df, transaction, metadata)


def _current_rows(store: DeltaTableStore, spark: SparkSession, path: str) -> DataFrame | None:
    """The table's rows at its version now: the state is merged after it is read, and Spark
    would recompute a cached result of it from the merged state."""
    version = store.version(path)
    return None if version is None else store.read(spark, path, version=version)
