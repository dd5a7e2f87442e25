"""A streaming DataFrame: run as the table's incremental query, exactly once per micro-batch
(append, complete, or update by the asset's keys)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from lakehouse_assets.io.handlers.query import has_work, run_query, skipped, stream_written
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.storage import DeltaSink, TableStore


def write_stream(df: DataFrame, run: TableRun, store: TableStore, log: Any) -> Written:
    """Run the query of ``df`` into the table."""
    if not has_work(run, store):
        return stream_written(skipped(run, log))
    sink = DeltaSink(store, str(run.table.path), str(run.table.checkpoint),
                     output_mode=run.output_mode, keys=run.keys, merge_schema=run.merge_schema)
    return stream_written(run_query(run, lambda: df, sink, log))
