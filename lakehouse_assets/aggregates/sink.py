"""Keeps a grouped table from a stream of source rows, one micro-batch at a time, exactly
once, touching only the groups a batch has rows for.

Guarantee: each micro-batch changes the table once, whatever crashes. The batch's rows are
reduced to partial results per group (:class:`~lakehouse_assets.aggregates.spec.IncrementalAggregate`),
merged with the partial results the groups had, and the table's rows of those groups are
rewritten copy-on-write on the executors: only the files holding a changed group are
replaced, in one commit that records the batch's app transaction, so a replay is skipped.

The partial results live in a state table inside the table's folder (``_aggregate_state``,
a Delta table no reader of the table sees; a mean is kept as its sum and count). The table
is committed first and its state second, each recording the batch: a replay after a crash
between the two skips the table and commits the state, computed from the state before the
batch, as the table was. Nothing is kept in Spark's state store, so a run does not load the
aggregation's whole state before its first row, and the cost of a batch follows the groups
it changes, not the table's size.

Rows are written clustered by the groups' time keys (a date, a timestamp), then the other
keys, in files of at most :data:`ROWS_PER_FILE` rows: a batch of recent data finds its groups
in the newest few files (Spark reads only the row groups within the batch's time range) and
rewrites only those.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from lakehouse_assets.aggregates.spec import IncrementalAggregate
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.storage.copy_on_write import files_holding, matching_keys
from lakehouse_assets.storage.engine import AppTransaction, CommitResult, TableStore
from lakehouse_assets.storage.sink import KeptTableSink

#: The folder, inside the table's folder, of the Delta table holding the groups' partials.
STATE_FOLDER = "_aggregate_state"
#: Commit metadata key: the aggregate (:meth:`IncrementalAggregate.as_metadata`, as JSON), so
#: the table says how its rows are made from its source's (what ``lakehouse trace`` reads).
AGGREGATE_KEY = "lakehouse.aggregate"
#: The most rows a written file holds, so a batch rewrites a bounded part of the table.
ROWS_PER_FILE = 100_000


@dataclass(frozen=True)
class AggregateTable:
    """The table at ``path`` grouped as ``spec`` says, and its state: :meth:`apply` merges one
    batch of source rows, once (by its app transaction)."""

    store: TableStore
    path: str
    spec: IncrementalAggregate
    #: Delta table properties the table is created with (its state table has none).
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def state_path(self) -> str:
        """Where the table keeps its groups' partial results."""
        return f"{self.path.rstrip('/')}/{STATE_FOLDER}"

    def apply(self, rows: DataFrame, transaction: AppTransaction, metadata: Mapping[str, str]) -> CommitResult:
        """Merge the batch of source rows ``rows`` into the groups it has rows for,
        recording ``transaction`` and ``metadata`` in the table's commit (and its state's)."""
        store, spec, keys = self.store, self.spec, self.spec.key_names
        spark = rows.sparkSession
        self._check_state(transaction)
        partials = spec.partials(rows).persist()
        try:
            changed = partials.select(*keys)
            time_keys = [f.name for f in partials.schema.fields
                         if f.name in keys and isinstance(f.dataType, T.DateType | T.TimestampType)]
            state_files, state_rows = files_holding(store, spark, self.state_path, changed, keys,
                                                    within_range=time_keys)
            before = [] if state_rows is None else [matching_keys(state_rows, changed, keys, "left_semi")]
            groups = spec.merged([*before, partials]).persist()
            try:
                cluster = [*time_keys, *[k for k in keys if k not in time_keys]]
                if transaction.held_by(store, self.path):
                    result = CommitResult(self.path, None, skipped=True)
                else:
                    files, table_rows = files_holding(store, spark, self.path, changed, keys, within_range=time_keys)
                    written = spec.results(groups)
                    if table_rows is not None:
                        written = matching_keys(table_rows, changed, keys, "left_anti").unionByName(written)
                    described = {**metadata, AGGREGATE_KEY: json.dumps(spec.as_metadata(), separators=(",", ":"))}
                    result = store.replace_files(
                        _clustered(written, cluster), self.path, replaced=files, transaction=transaction,
                        operation="AGGREGATE", metadata=described, rows_changed=partials.count(), row_identity=keys,
                        properties=self.properties)
                fault_point("aggregate.table_committed")
                state = groups
                if state_rows is not None:
                    state = matching_keys(state_rows, changed, keys, "left_anti").unionByName(groups)
                store.replace_files(_clustered(state, cluster), self.state_path, replaced=state_files,
                                    transaction=transaction, operation="AGGREGATE STATE", metadata=metadata)
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


def _clustered(rows: DataFrame, cluster: list[str]) -> DataFrame:
    """``rows`` in files of at most ROWS_PER_FILE rows, each a range of ``cluster``."""
    files = max(1, math.ceil(rows.count() / ROWS_PER_FILE))
    return rows.repartitionByRange(files, *cluster).sortWithinPartitions(*cluster)


@dataclass
class AggregateSink(KeptTableSink):
    """A ``foreachBatch`` function merging each micro-batch of source rows into the grouped
    table at ``sink.path`` as ``spec`` says, with ``sink``'s exactly-once commits (query id,
    run id, offsets)."""

    spec: IncrementalAggregate

    @property
    def table(self) -> AggregateTable:
        return AggregateTable(self.sink.store, self.sink.path, self.spec, self.sink.properties)
