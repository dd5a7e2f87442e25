"""A streaming DataFrame: run as the table's incremental query, exactly once per micro-batch
(append, complete, or update by the asset's keys), its expectations enforced on each batch."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from lakehouse_assets.assets.table_asset import ExpectedRows
from lakehouse_assets.io.handlers.query import has_work, run_query, skipped, stream_written
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.metadata import expectations_metadata
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.quality.expectations import ExpectationsSink, counts_of_commits
from lakehouse_assets.storage import DeltaSink, TableStore
from lakehouse_assets.streaming import RunSink


def write_stream(output: DataFrame | ExpectedRows, run: TableRun, store: TableStore, log: Any) -> Written:
    """Run the query of the DataFrame into the table."""
    df, rules = (output.rows, output.expectations) if isinstance(output, ExpectedRows) else (output, ())
    if not has_work(run, store):
        return stream_written(skipped(run, log), **expectations_metadata(rules, counts_of_commits([])))
    table = DeltaSink(store, str(run.table.path), str(run.table.checkpoint),
                      output_mode=run.output_mode, keys=run.keys, merge_schema=run.merge_schema)
    sink: RunSink = ExpectationsSink(table, rules, run.table.table_name) if rules else table
    query = run_query(run, lambda: df, sink, log)
    return stream_written(query, **expectations_metadata(rules, counts_of_commits(query.commits)))
