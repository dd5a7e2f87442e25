"""A batch DataFrame: written in one commit, by the asset's write mode (overwrite, append,
or merge by its keys), after its expectations are enforced on it."""

from __future__ import annotations

from typing import Any

from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.run_report import table_run_report
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.outputs import ExpectedRows
from lakehouse_assets.quality.expectations import commit_metadata, enforce
from lakehouse_assets.storage import DeltaTableStore


def write_batch(output: ExpectedRows, run: TableRun, store: DeltaTableStore, log: Any) -> Written:
    """Write the batch DataFrame to the table in one commit; a FAIL expectation it breaks
    stops the write before anything is committed."""
    df, rules = output.rows, output.expectations
    path = str(run.table.path)
    if rules:
        df.persist()  # counted, then written: computed once
    try:
        counts = enforce(df, rules, run.table.table_name) if rules else None
        metadata = {**(commit_metadata(counts) if counts is not None else {}), **run.stamp_metadata(store)}
        if run.spec.write_mode == "merge":
            commit = store.merge(df, path, keys=run.spec.keys, merge_schema=run.spec.merge_schema, metadata=metadata,
                                 layout=run.spec.layout, declared=run.spec.declared_types)
        else:
            commit = store.write(df, path, mode=run.spec.write_mode, merge_schema=run.spec.merge_schema,
                                 overwrite_schema=run.spec.write_mode == "overwrite", metadata=metadata,
                                 layout=run.spec.layout, declared=run.spec.declared_types)
    finally:
        if rules:
            df.unpersist()
    return Written(commit.version, table_run_report(store, path, run.run_id, rules))
