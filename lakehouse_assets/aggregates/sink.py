"""Keeps a grouped table from a stream of source rows, one micro-batch at a time, exactly
once, touching only the groups a batch has rows for.

Guarantee: each micro-batch changes the table once, whatever crashes. The batch's rows are
reduced to partial results per group (:class:`~lakehouse_assets.aggregates.spec.IncrementalAggregate`),
merged with the partial results the groups had, and the groups' new results are merged into
the table by Delta's ``MERGE INTO``, in one commit that records the batch's app transaction,
so a replay is skipped.

The partial results live in a state table inside the table's folder (``_aggregate_state``,
a Delta table no reader of the table sees; a mean is kept as its sum and count). The table
is committed first and its state second, each recording the batch: a replay after a crash
between the two skips the table and commits the state, computed from the state before the
batch, as the table was. Nothing is kept in Spark's state store, so a run does not load the
aggregation's whole state before its first row, and the cost of a batch follows the groups
it changes, not the table's size: the search for a batch's groups, in the state and in the
table, is bounded by the batch's range of the groups' time keys (a date, a timestamp), so
Delta skips the files outside it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from lakehouse_assets.aggregates.spec import IncrementalAggregate
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.storage.declared_types import DeclaredTypes
from lakehouse_assets.storage.engine import AppTransaction, CommitResult
from lakehouse_assets.storage.layout import TableLayout
from lakehouse_assets.storage.merge import in_range_of, matching_keys
from lakehouse_assets.storage.sink import KeptTableSink

if TYPE_CHECKING:
    from lakehouse_assets.storage.delta import DeltaTableStore

#: The folder, inside the table's folder, of the Delta table holding the groups' partials.
STATE_FOLDER = "_aggregate_state"
#: Commit metadata key: the aggregate (:meth:`IncrementalAggregate.as_metadata`, as JSON), so
#: the table says how its rows are made from its source's (what ``lakehouse trace`` reads).
AGGREGATE_KEY = "lakehouse.aggregate"


@dataclass(frozen=True)
class AggregateTable:
    """The table at ``path`` grouped as ``spec`` says, and its state: :meth:`apply` merges one
    batch of source rows, once (by its app transaction)."""

    store: DeltaTableStore
    path: str
    spec: IncrementalAggregate
    #: The properties and partition or clustering columns the table is created with (its
    #: state table has none).
    layout: TableLayout = field(default_factory=TableLayout)
    #: The column types its definition declares, which its rows are cast to.
    declared: DeclaredTypes | None = None

    @property
    def state_path(self) -> str:
        """Where the table keeps its groups' partial results."""
        return f"{self.path.rstrip('/')}/{STATE_FOLDER}"

    def apply(self, rows: DataFrame, transaction: AppTransaction, metadata: Mapping[str, str]) -> CommitResult:
        """Merge the batch of source rows ``rows`` into the groups it has rows for,
        recording ``transaction`` and ``metadata`` in the table's commit (and its state's)."""
        store, spec, keys = self.store, self.spec, self.spec.key_names
        if transaction.held_by(store, self.state_path):
            # The state is committed after the table: a batch it holds, both hold. A replay
            # after the run that committed both is skipped before any Spark work.
            return CommitResult(self.path, None, skipped=True)
        spark = rows.sparkSession
        self._check_state(transaction)
        partials = spec.partials(rows).persist()
        try:
            changed = partials.select(*keys)
            time_keys = [f.name for f in partials.schema.fields
                         if f.name in keys and isinstance(f.dataType, T.DateType | T.TimestampType)]
            # At its version now: the state is merged below, and Spark would recompute the
            # cached groups from the merged state.
            state_version = store.version(self.state_path)
            state = None if state_version is None else store.read(spark, self.state_path, version=state_version)
            if state is not None and time_keys:
                state = in_range_of(state, changed, time_keys)
            before = [] if state is None else [matching_keys(state, changed, keys, "left_semi")]
            groups = spec.merged([*before, partials]).persist()
            try:
                if transaction.held_by(store, self.path):
                    result = CommitResult(self.path, None, skipped=True)
                else:
                    described = {**metadata, AGGREGATE_KEY: json.dumps(spec.as_metadata(), separators=(",", ":"))}
                    result = store.merge(spec.results(groups), self.path, keys=keys, within_range=time_keys,
                                         transaction=transaction, operation="AGGREGATE", metadata=described,
                                         layout=self.layout, declared=self.declared)
                fault_point("aggregate.table_committed")
                store.merge(groups, self.state_path, keys=keys, within_range=time_keys, transaction=transaction,
                            operation="AGGREGATE STATE", metadata=metadata)
                return result
            finally:
                groups.unpersist()
        finally:
            partials.unpersist()

    def _check_state(self, transaction: AppTransaction) -> None:
        """Refuse a table that has rows but no state, unless it is this batch's table commit
        whose state commit a crash cut off (the replay commits it)."""
        store = self.store
        if store.exists(self.path) and not store.exists(self.state_path) and not transaction.held_by(store, self.path):
            raise LakehouseError(
                f"Delta table {self.path} has no {STATE_FOLDER} beside it: it was written whole (complete mode) "
                "before it was kept incrementally, and a group's partial results cannot be recovered from its "
                "rows. Rebuild it once with a full refresh (lakehouse reset <layer.table>, or run config "
                "full_refresh: true).")


@dataclass
class AggregateSink(KeptTableSink):
    """A ``foreachBatch`` function merging each micro-batch of source rows into the grouped
    table at ``sink.path`` as ``spec`` says, with ``sink``'s exactly-once commits (query id,
    run id, offsets)."""

    spec: IncrementalAggregate

    @property
    def table(self) -> AggregateTable:
        return AggregateTable(self.sink.store, self.sink.path, self.spec, self.sink.layout, self.sink.declared)
