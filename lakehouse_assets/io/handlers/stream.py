"""A streaming DataFrame: run as the table's incremental query, exactly once per micro-batch
(append, complete, update by the asset's keys: a grouped query's changed groups, or a change
feed applied AUTO CDC), its expectations enforced on each batch. An append counting nothing
per batch goes through Delta's own streaming sink."""

from __future__ import annotations

from typing import Any

from lakehouse_assets.cdc import AutoCdcSink
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.io.handlers.query import reading_before, run_query, stream_written
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.outputs import ExpectedRows
from lakehouse_assets.quality.expectations import expecting
from lakehouse_assets.storage import DeltaSink, DeltaTableStore
from lakehouse_assets.storage.sink import DeltaStreamSink, TableSink
from lakehouse_assets.streaming import RunSink

#: Where a grouped table kept before Spark kept its groups held them: its query's checkpoint
#: has no state for the aggregation.
_OLD_AGGREGATE_STATE = "_aggregate_state"


def write_stream(output: ExpectedRows, run: TableRun, store: DeltaTableStore, log: Any) -> Written:
    """Run the query of the streaming DataFrame into the table."""
    rules = output.expectations
    reading = reading_before(run, store)
    sink: RunSink
    if run.spec.output_mode == "append" and not rules and run.spec.auto_cdc is None:
        # Appends to one table, counting nothing per batch: Delta's own streaming sink.
        sink = DeltaStreamSink(store, str(run.table.path), merge_schema=run.spec.merge_schema,
                               layout=run.spec.layout, declared=run.spec.declared_types)
    else:
        sink = expecting(_kept(run, store), rules, run.table.table_name)
    query = run_query(run, lambda: output.rows, sink, log, reading)
    return stream_written(run, store, query, rules)


def _kept(run: TableRun, store: DeltaTableStore) -> TableSink:
    """The ``foreachBatch`` sink keeping the table as its run says: appended, replaced,
    merged by key, or applied AUTO CDC."""
    path = str(run.table.path)
    if run.spec.recomputed_by and store.exists(f"{path}/{_OLD_AGGREGATE_STATE}"):
        raise LakehouseError(
            f"{run.table.table_name} was kept by the lakehouse's own incremental aggregate (its groups' partial "
            f"results in {path}/{_OLD_AGGREGATE_STATE}); Spark's stateful aggregation keeps them in the query's "
            f"checkpoint now, which has none. Rebuild the table once: lakehouse reset {run.table.table_name} --yes, "
            "then run it (or run it with config full_refresh: true).")
    delta = DeltaSink(store, path, output_mode=run.spec.output_mode, keys=run.spec.keys,
                      merge_schema=run.spec.merge_schema,
                      layout=run.spec.layout, declared=run.spec.declared_types)
    if run.spec.auto_cdc is not None:
        return AutoCdcSink(delta, run.spec.auto_cdc)
    return delta
