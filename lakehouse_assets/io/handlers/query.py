"""The steps every streaming output shares: find what the run's sources hold, run the
table's query to completion, and report the run from the table's commits.

Whether a query has anything to read is decided before its asset's body runs
(:mod:`lakehouse_assets.assets.nothing_to_read`): a table with nothing new records no
materialization, so a handler always runs its query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.run_report import run_report
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.quality.rules import Rule
from lakehouse_assets.storage import DeltaTableStore, run_commits
from lakehouse_assets.storage.batch_record import Reading
from lakehouse_assets.streaming import RestartPolicy, RunSink, StreamRun, TriggerKind, run_stream
from lakehouse_assets.tables.reading import tables_now

# Triggers whose query reads everything its sources held when it started.
_READS_ALL = (TriggerKind.availableNow, TriggerKind.once)


def reading_before(run: TableRun, store: DeltaTableStore) -> Reading | None:
    """The tables the run's query streams as they are before it starts: it will have read
    them at least this far once it has run (recorded in each of its commits). None for a
    trigger that may stop first (``processingTime``), or a source not there yet."""
    if run.trigger.kind not in _READS_ALL:
        return None
    return tables_now(run.spec.streams_from, run.settings, store)


def run_query(
    run: TableRun, build: Callable[[], DataFrame], sink: RunSink, log: Any, reading: Reading | None,
    restart_when: RestartPolicy | None = None, max_restarts: int = 3,
) -> StreamRun:
    """Run the table's query (``build`` makes its streaming DataFrame) into ``sink`` until
    its trigger is done, restarting it (up to ``max_restarts`` times) when ``restart_when`` says
    so; every commit records the run and what it found its sources at (``reading``)."""
    into = " -> ".join(t.table_name for t in run.written)
    log.info(f"Running the {run.trigger.kind} query of {into} (checkpoint {run.table.checkpoint})")
    return run_stream(
        build, sink,
        checkpoint_location=str(run.table.checkpoint),
        trigger=run.trigger,
        query_name=run.query_name,
        restart_when=restart_when,
        max_restarts=max_restarts,
        run_id=run.run_id,
        reading=reading,
    )


def stream_written(run: TableRun, store: DeltaTableStore, query: StreamRun,
                   expectations: Sequence[Rule] = (), **extra: Any) -> Written:
    """Report the run from the commits its query made (and its quarantine's), then its
    restarts and query id, and for a query with a watermark the rows it dropped as too late."""
    quarantined = (run_commits(store, str(run.quarantine.path), query.run_id)
                   if run.quarantine is not None and query.run_id else None)
    late = ({"rows_dropped_by_watermark": dg.MetadataValue.int(query.rows_dropped_by_watermark)}
            if query.watermarked else {})
    return Written(query.last_version, query=query, metadata={
        **run_report(query.commits, expectations, quarantined),
        **late,
        "query_restarts": dg.MetadataValue.int(query.restarts),
        "query_id": dg.MetadataValue.text(query.query_id or ""),
        **extra,
    })
