"""A batch DataFrame: written in one commit, by the asset's write mode (overwrite, append,
or merge by its keys)."""

from __future__ import annotations

from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.storage import TableStore


def write_batch(df: DataFrame, run: TableRun, store: TableStore, log: Any) -> Written:
    """Write ``df`` to the table in one commit."""
    path = str(run.table.path)
    if run.write_mode == "merge":
        commit = store.merge(df, path, keys=run.keys, merge_schema=run.merge_schema)
    else:
        commit = store.write(df, path, mode=run.write_mode, merge_schema=run.merge_schema,
                             overwrite_schema=run.write_mode == "overwrite")
    return Written(commit.version, {"rows_written": dg.MetadataValue.int(commit.rows_written)})
