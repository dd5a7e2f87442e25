"""The steps every streaming output shares: check the checkpoint before starting, skip a
query with nothing to read, run it to completion, and report it from its progress and the
table's commits.

A damaged checkpoint, one that disagrees with the tables its query writes, or one that
points into an upstream table recreated since, stops the run before Spark starts, with an
error naming it and the way out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from lakehouse_assets.checkpoints.checkpoint import Checkpoint
from lakehouse_assets.io.events import events_metadata, expectation_counts, record_query
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.metadata import expectations_metadata
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.quality.rules import Rule
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.streaming import RestartPolicy, RunSink, StreamRun, TriggerKind, run_stream
from lakehouse_assets.tables.upstream_versions import UpstreamVersions

# Triggers whose query reads everything its sources held when it started.
_READS_ALL = (TriggerKind.availableNow, TriggerKind.once)


def upstream_before(run: TableRun, store: DeltaTableStore) -> UpstreamVersions | None:
    """The tables the run's query streams as they are before it starts: it will have read
    them at least this far once it has run (recorded as ``upstream_versions``). None for a
    trigger that may stop first (``processingTime``), or a query not declared to stream tables."""
    if run.trigger.kind not in _READS_ALL:
        return None
    return UpstreamVersions.now(run.spec.streams_from, run.settings, store)


def has_work(run: TableRun, store: DeltaTableStore, has_new_data: Callable[[], bool | None] | None = None,
             reading: UpstreamVersions | None = None) -> bool:
    """Check the checkpoint, then say whether the query has anything to read: starting a
    query costs seconds even when it reads nothing. ``has_new_data`` is the source's own
    answer; otherwise the upstream tables as the run found them (``reading``) say, against
    what the last materialization read (:mod:`lakehouse_assets.tables.upstream_versions`), and
    without a checkpoint everything is new. Unknown counts as work."""
    state = None
    if not run.full_refresh:  # a full refresh has just cleared the checkpoint
        checkpoint = Checkpoint(str(run.table.checkpoint), run.table.table_name)
        state = checkpoint.validate([str(t.path) for t in run.written], store)
        if state is not None:
            checkpoint.check_sources(state, store, run.root)
    if has_new_data is not None:
        return has_new_data() is not False
    return state is None or reading is None or reading != run.last_read


def run_query(
    run: TableRun, build: Callable[[], DataFrame], sink: RunSink, log: Any,
    restart_when: RestartPolicy | None = None, max_restarts: int = 3,
) -> StreamRun:
    """Run the table's query (``build`` makes its streaming DataFrame) into ``sink`` until
    its trigger is done, restarting it (up to ``max_restarts`` times) when ``restart_when`` says so."""
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
    )


def skipped(run: TableRun, log: Any) -> StreamRun:
    """The report of a query not started: there is nothing new to read."""
    log.info(f"{run.table.table_name}: no new input since the last run; no query started")
    return StreamRun()


def stream_written(run: TableRun, store: DeltaTableStore, query: StreamRun,
                   expectations: Sequence[Rule] = (), *, reads_files: bool = False,
                   reading: UpstreamVersions | None = None, **extra: Any) -> Written:
    """Log the query's batches in the event log (and any a crashed run left unlogged), and
    report the run from the log: rows read, written and quarantined, batches and what its
    ``expectations`` counted (none of them when it committed no batch); then its restarts
    and id, for a query with a watermark the rows it dropped as too late, and the upstream
    versions it has read to (``reading``, found before it started)."""
    events = record_query(run, store, query, reads_files=reads_files)
    late = ({"rows_dropped_by_watermark": dg.MetadataValue.int(query.rows_dropped_by_watermark)}
            if query.watermarked else {})
    counted = events_metadata(events)
    return Written(query.last_version, query=query, metadata={
        **late,
        **counted,
        "query_restarts": dg.MetadataValue.int(query.restarts),
        "query_id": dg.MetadataValue.text(query.query_id or ""),
        **(expectations_metadata(expectations, expectation_counts(events)) if counted else {}),
        **(reading.metadata() if reading is not None else {}),
        **extra,
    })
