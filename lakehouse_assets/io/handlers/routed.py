"""Rows routed by the table's expectations: one query writes the rows that pass to the table
and those an ERROR rule drops, each with its reason, to the table's quarantine, both exactly
once per micro-batch under one checkpoint; a FAIL rule's failure stops the batch first. A
table recomputed whole (a materialized view) routes its batch the same way, replacing both."""

from __future__ import annotations

from typing import Any

import dagster as dg

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.io.events import record_write
from lakehouse_assets.io.handlers.query import has_work, run_query, skipped, stream_written, upstream_before
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.metadata import expectations_metadata
from lakehouse_assets.io.table_run import TableRef, TableRun
from lakehouse_assets.outputs import RoutedRows
from lakehouse_assets.quality.duplicates import DUPLICATES_KEY
from lakehouse_assets.quality.expectations import commit_metadata, enforce
from lakehouse_assets.quality.quarantine import QuarantineSink, dropped_by, route, split_routed
from lakehouse_assets.storage import DeltaSink, DeltaTableStore
from lakehouse_assets.storage.sink import RUN_KEY


def write_routed(routed: RoutedRows, run: TableRun, store: DeltaTableStore, log: Any) -> Written:
    """Run the routing query into the table and its quarantine."""
    if run.quarantine is None:
        raise LakehouseError(
            f"{run.table.table_name} returned routed rows, but its asset names no quarantine table: "
            "declare it with routed_table_asset(quarantine_name=...)")
    if not routed.rows.isStreaming:
        return _routed_whole(routed, run, store, run.quarantine)
    rules = routed.expectations
    reading = upstream_before(run, store)
    if not has_work(run, store, reading=reading):
        return stream_written(run, store, skipped(run, log), rules, reading=reading)
    checkpoint = str(run.table.checkpoint)
    sink = QuarantineSink(
        passed=DeltaSink(store, str(run.table.path), checkpoint, merge_schema=run.spec.merge_schema,
                         layout=run.spec.layout, declared=run.spec.declared_types),
        # The quarantine keeps refused rows as they came: a column new upstream is added to
        # it, never a reason to stop, or its rows would have nowhere to go.
        quarantine=DeltaSink(store, str(run.quarantine.path), checkpoint, merge_schema=True),
        passed_columns=routed.passed_columns,
        quarantine_columns=routed.quarantine_columns,
        rules=rules,
        table=run.table.table_name,
        unique_by=routed.unique_by,
    )
    if run.spec.declared_types is not None:
        # Each batch writes the quarantine before the table: a passed row that cannot take
        # the table's declared types is refused before the query starts, not between the two.
        passed, _ = split_routed(route(routed.rows, rules), passed_columns=routed.passed_columns,
                                 quarantine_columns=routed.quarantine_columns)
        run.spec.declared_types.fitted(passed, str(run.table.path))
    # Routed before foreachBatch, so Spark fixes current_timestamp() (time rules read it) once
    # per micro-batch and both outputs of a batch see one reason.
    query = run_query(run, lambda: route(routed.rows, rules), sink, log)
    if not routed.unique_by:
        return stream_written(run, store, query, rules, reading=reading)
    duplicates = sum(int(c.metadata.get(DUPLICATES_KEY, 0)) for c in query.commits)
    return stream_written(run, store, query, rules, reading=reading,
                          duplicates_quarantined=dg.MetadataValue.int(duplicates))


def _routed_whole(routed: RoutedRows, run: TableRun, store: DeltaTableStore, quarantine: TableRef) -> Written:
    """A table recomputed whole: the rows that pass replace the table, those an ERROR rule
    drops replace its quarantine (what the table drops now, each with its reasons), and every
    rule's counts go into the table's commit; a FAIL rule's failure stops both writes."""
    rules = routed.expectations
    rows = route(routed.rows, rules).persist()
    try:
        counts = enforce(rows, rules, run.table.table_name, dropped_by=dropped_by())
        passed, quarantined = split_routed(rows, passed_columns=routed.passed_columns,
                                           quarantine_columns=routed.quarantine_columns)
        ran = {RUN_KEY: run.run_id} if run.run_id else {}
        store.write(quarantined, str(quarantine.path), mode="overwrite", merge_schema=True, overwrite_schema=True,
                    metadata=ran)
        commit = store.write(passed, str(run.table.path), mode="overwrite", merge_schema=run.spec.merge_schema,
                             overwrite_schema=True, metadata={**commit_metadata(counts), **ran},
                             layout=run.spec.layout, declared=run.spec.declared_types)
    finally:
        rows.unpersist()
    record_write(run, commit, counts)
    return Written(commit.version, {"rows_written": dg.MetadataValue.int(commit.rows_written),
                                    **expectations_metadata(rules, counts)})
