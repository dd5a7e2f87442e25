"""Recording what each micro-batch of a table did in the event log, from the table's own
commits, and reporting a run from the log.

After a table's query has run (or found nothing to do, or failed), under the table's locks,
:func:`record_query` reads the commits the query made since the last batch the event log
holds (this run's, and any a crashed run left unlogged) and appends one event per batch:

- the table version and rows written, from the batch's commit;
- the rows quarantined, from the quarantine's commit of the same batch;
- what each rule counted, from the commit's metadata;
- the rows read, and when and how long the batch ran, from Spark's progress when this run
  saw the batch (a replayed batch included); for a batch only the log remembers, the rows
  its rules checked (or wrote and quarantined) and the time its offsets were logged.

The log's app transaction makes a second recording of a batch a no-op, so recording is
simply done again after every run. Nothing here runs a Spark job.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg

from lakehouse_assets.checkpoints.checkpoint import BatchOffsets, Checkpoint, recorded_offsets
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.quality.expectations import EXPECTATIONS_KEY, ExpectationCounts
from lakehouse_assets.storage import AppTransaction, CommitResult, DeltaTableStore, HistoryEntry
from lakehouse_assets.storage.event_log import (
    BatchEvent,
    ExpectationResult,
    append_events,
    event_log_path,
    last_logged_batch,
    query_app_id,
    read_events,
)
from lakehouse_assets.storage.history import newest_first
from lakehouse_assets.storage.sink import RUN_KEY
from lakehouse_assets.streaming import StreamRun

# How much of a failed batch's error the log keeps: its first lines name what failed.
_ERROR_LIMIT = 4000
# Batch writes (no query) are logged under this app transaction, by table version.
_WRITES = "writes"


def record_query(run: TableRun, store: DeltaTableStore, query: StreamRun | None = None, *,
                 reads_files: bool = False) -> list[BatchEvent]:
    """Log every batch the table's query committed that the log lacks; the run's events of
    the table, read back from the log. An ingestion ``reads_files``: Spark counts the text it
    read (whole files, lines), not records; every record becomes one row, so the rows it
    read are the rows it wrote."""
    query_id = (query.query_id if query is not None else None) or Checkpoint(str(run.table.checkpoint)).query_id()
    if query_id is not None:
        _log_committed(run, store, query_id, query, reads_files=reads_files)
    return run_events(run, (query.run_id if query is not None else None) or run.run_id)


def record_failure(run: TableRun, store: DeltaTableStore, error: BaseException) -> None:
    """After the table's query failed: log the batches it did commit, and one ``failed``
    event for the batch it was running (the one Spark planned and did not finish)."""
    checkpoint = Checkpoint(str(run.table.checkpoint), run.table.table_name)
    query_id = checkpoint.query_id()
    if query_id is None:
        return
    _log_committed(run, store, query_id, None)
    try:
        state = checkpoint.state()
    except Exception:  # noqa: BLE001 - a damaged checkpoint is the error being reported
        state = None
    failed = BatchEvent(
        run_id=run.run_id, table=run.table.table_name, query_id=query_id,
        batch_id=state.pending_batch if state is not None else None,
        table_version=None, input_rows=None, output_rows=None,
        started_at=dt.datetime.now(dt.UTC), status="failed", error=str(error)[:_ERROR_LIMIT])
    append_events(event_log_path(run.root), [failed])


def record_write(run: TableRun, commit: CommitResult, counts: ExpectationCounts | None = None) -> list[BatchEvent]:
    """Log one batch write (no query) of the table, with what its rules ``counts``ed, once
    per table version."""
    if commit.version is not None:
        event = BatchEvent(
            run_id=run.run_id, table=run.table.table_name, query_id=None, batch_id=None,
            table_version=commit.version, input_rows=counts.rows if counts else commit.rows_written,
            output_rows=commit.rows_written, expectations=_results(counts),
            started_at=dt.datetime.now(dt.UTC))
        append_events(event_log_path(run.root), [event],
                      logs=AppTransaction(query_app_id(run.table.table_name, _WRITES), commit.version))
    return run_events(run, run.run_id)


def run_events(run: TableRun, run_id: str | None) -> list[BatchEvent]:
    """What the event log holds of run ``run_id``'s batches of the table."""
    if run_id is None:
        return []
    return read_events(event_log_path(run.root), table=run.table.table_name, run_id=run_id)


def events_metadata(events: Sequence[BatchEvent]) -> dict[str, Any]:
    """What a materialization reports (and the UI plots across them), summed from the run's
    events: rows read, written and quarantined, and micro-batches committed. None of them
    when the run committed no batch: the table did not change, and zeros would be plotted as
    if it had (its ``written_version`` says "nothing new")."""
    committed = [e for e in events if e.status == "committed"]
    if not committed:
        return {}
    return {
        "rows_processed": dg.MetadataValue.int(sum(e.input_rows or 0 for e in committed)),
        "rows_written": dg.MetadataValue.int(sum(e.output_rows or 0 for e in committed)),
        "rows_quarantined": dg.MetadataValue.int(sum(e.quarantined_rows or 0 for e in committed)),
        "micro_batches": dg.MetadataValue.int(sum(1 for e in committed if e.batch_id is not None)),
    }


def expectation_counts(events: Iterable[BatchEvent]) -> ExpectationCounts:
    """What the rules counted over ``events``."""
    total = ExpectationCounts()
    for event in events:
        if event.status == "committed" and event.expectations:
            rows = event.expectations[0].passed + event.expectations[0].failed
            total = total + ExpectationCounts(rows, {e.name: e.failed for e in event.expectations})
    return total


def _log_committed(run: TableRun, store: DeltaTableStore, query_id: str, query: StreamRun | None, *,
                   reads_files: bool = False) -> None:
    table = run.table.table_name
    log = event_log_path(run.root)
    after = last_logged_batch(log, table, query_id)
    commits = commits_since(store, str(run.table.path), query_id, after)
    if not commits:
        return
    quarantined = ({c.batch_id: c.rows_written or 0
                    for c in commits_since(store, str(run.quarantine.path), query_id, after)}
                   if run.quarantine is not None else {})
    progress = {int(p["batchId"]): p for p in (query.progress if query is not None else [])}
    checkpoint = Checkpoint(str(run.table.checkpoint))
    offsets_logged = checkpoint.batch_start_times()
    events = [_committed_event(run, commit, quarantined, progress, offsets_logged, reads_files,
                               _offsets(commit, checkpoint)) for commit in commits]
    last = max(c.batch_id for c in commits if c.batch_id is not None)
    append_events(log, events, logs=AppTransaction(query_app_id(table, query_id), last))


def commits_since(store: DeltaTableStore, path: str, query_id: str, after: int | None) -> list[HistoryEntry]:
    """The commits of query ``query_id`` to the table at ``path`` of batches after ``after``
    (all, when None), oldest first. The log is read newest first, and only as far back as needed."""
    found: list[HistoryEntry] = []
    for entry in newest_first(store, path):
        if entry.query != query_id or entry.batch_id is None:
            continue
        if after is not None and entry.batch_id <= after:
            break
        found.append(entry)
    return found[::-1]


def _committed_event(
    run: TableRun, commit: HistoryEntry, quarantined: Mapping[int | None, int],
    progress: Mapping[int, Mapping[str, Any]], offsets_logged: Mapping[int, dt.datetime], reads_files: bool,
    offsets: BatchOffsets | None,
) -> BatchEvent:
    batch = commit.batch_id
    assert batch is not None  # commits_since keeps only a query's batches
    counts = _counts(commit.custom_metadata)
    output, held = commit.rows_written or 0, quarantined.get(batch) if run.quarantine is not None else None
    seen = progress.get(batch)
    if seen is not None:
        input_rows: int | None = int(seen["numInputRows"])
        started: dt.datetime | None = _parse_time(seen.get("timestamp"))
        duration = (seen.get("durationMs") or {}).get("triggerExecution")
    else:
        # Only the log remembers this batch (its run died before reporting it).
        input_rows = counts.rows if counts else (output + held if held is not None else None)
        started, duration = offsets_logged.get(batch, commit.timestamp), None
    if reads_files:
        input_rows = output
    return BatchEvent(
        run_id=str(commit.custom_metadata.get(RUN_KEY) or run.run_id or ""), table=run.table.table_name,
        query_id=commit.query, batch_id=batch, table_version=commit.version,
        input_rows=input_rows, output_rows=output, quarantined_rows=held, expectations=_results(counts),
        started_at=started, duration_ms=None if duration is None else int(duration),
        source_offsets=offsets.to_json() if offsets is not None else None)


def _offsets(commit: HistoryEntry, checkpoint: Checkpoint) -> BatchOffsets | None:
    """Where the batch of ``commit`` had read its sources to: as its commit recorded it, else
    (Delta's own sink records nothing) as the checkpoint logged it, which Spark keeps for the
    last hundred batches at least: a batch is logged by the run that made it or the next one."""
    assert commit.batch_id is not None  # commits_since keeps only a query's batches
    return recorded_offsets(commit) or checkpoint.batch_offsets(commit.batch_id)


def _counts(metadata: Mapping[str, Any]) -> ExpectationCounts | None:
    text = metadata.get(EXPECTATIONS_KEY)
    return ExpectationCounts.from_json(str(text)) if text else None


def _results(counts: ExpectationCounts | None) -> tuple[ExpectationResult, ...]:
    if counts is None:
        return ()
    return tuple(ExpectationResult(name, counts.passed(name), failed) for name, failed in counts.failed.items())


def _parse_time(text: Any) -> dt.datetime | None:
    if not text:
        return None
    when = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)
