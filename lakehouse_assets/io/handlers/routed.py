"""Rows routed by the table's expectations: one query writes the rows that pass to the table
and those an ERROR rule drops, each with its reason, to the table's quarantine, both exactly
once per micro-batch under one checkpoint; a FAIL rule's failure stops the batch first. A
table recomputed whole (a materialized view) routes its batch the same way, replacing both."""

from __future__ import annotations

from typing import Any

import dagster as dg

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.io.handlers.query import reading_before, run_query, stream_written
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.run_report import table_run_report
from lakehouse_assets.io.table_run import TableRef, TableRun
from lakehouse_assets.outputs import RoutedRows
from lakehouse_assets.quality.duplicates import DUPLICATES_KEY
from lakehouse_assets.quality.expectations import commit_metadata, enforce
from lakehouse_assets.quality.quarantine import QuarantineSink, dropped_by, route, split_routed
from lakehouse_assets.storage import DeltaSink, DeltaTableStore


def write_routed(routed: RoutedRows, run: TableRun, store: DeltaTableStore, log: Any) -> Written:
    """Run the routing query into the table and its quarantine."""
    if run.quarantine is None:
        raise LakehouseError(
            f"{run.table.table_name} returned routed rows, but its asset names no quarantine table: "
            "declare it with routed_table_asset(quarantine_name=...)")
    if not routed.rows.isStreaming:
        return _routed_whole(routed, run, store, run.quarantine)
    rules = routed.expectations
    reading = reading_before(run, store)
    sink = QuarantineSink(
        passed=DeltaSink(store, str(run.table.path), merge_schema=run.spec.merge_schema,
                         layout=run.spec.layout, declared=run.spec.declared_types),
        # The quarantine keeps refused rows as they came: a column new upstream is added to
        # it, never a reason to stop, or its rows would have nowhere to go.
        quarantine=DeltaSink(store, str(run.quarantine.path), merge_schema=True),
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
    query = run_query(run, lambda: route(routed.rows, rules), sink, log, reading)
    if not routed.unique_by:
        return stream_written(run, store, query, rules)
    duplicates = sum(int(c.custom_metadata.get(DUPLICATES_KEY, 0)) for c in query.commits)
    return stream_written(run, store, query, rules, duplicates_quarantined=dg.MetadataValue.int(duplicates))


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
        ran = {**run.stamp_metadata(store)}
        store.write(quarantined, str(quarantine.path), mode="overwrite", merge_schema=True, overwrite_schema=True,
                    metadata=ran)
        commit = store.write(passed, str(run.table.path), mode="overwrite", merge_schema=run.spec.merge_schema,
                             overwrite_schema=True, metadata={**commit_metadata(counts), **ran},
                             layout=run.spec.layout, declared=run.spec.declared_types)
    finally:
        rows.unpersist()
    return Written(commit.version, table_run_report(store, str(run.table.path), run.run_id, rules,
                                                    str(quarantine.path)))
