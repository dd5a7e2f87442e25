"""The lakehouse's event log: one row per micro-batch per table, in a Delta table of its own
(``$LAKEHOUSE_ROOT/_system/event_log``, ``system.event_log`` by name).

Each table's batches are appended with a Delta app transaction named after the table and its
query (``<layer.name>#<query id>``) whose version is the last batch appended: a batch the log
already holds is never appended again, whoever asks and whatever crashed in between, so every
committed batch has exactly one ``committed`` row. A batch that failed has a ``failed`` row
per attempt (no transaction: each attempt is an event of its own).

Rows are written and read by delta-rs from Arrow, never by Spark: recording a run's batches
costs one small commit and no Spark job. Every :data:`COMPACT_EVERY` appends the log's small
files are compacted (a commit that changes no rows): each run reads its own events back, and
a read costs what the number of files costs, which would otherwise grow by one per
materialization of every table until the daily maintenance job.
"""

from __future__ import annotations

import datetime as dt
import functools
import operator
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.location import Location
from lakehouse_assets.settings import SYSTEM_LAYER, LakehouseSettings
from lakehouse_assets.storage.delta import META_BATCH, META_OPERATION, META_QUERY, META_ROWS
from lakehouse_assets.storage.delta_rs_snapshot import DeltaRsSnapshot
from lakehouse_assets.storage.engine import AppTransaction

if TYPE_CHECKING:
    from lakehouse_assets.checkpoints.logs import BatchOffsets

EVENT_LOG = "event_log"
#: The event log by name.
EVENT_LOG_TABLE = f"{SYSTEM_LAYER}.{EVENT_LOG}"

EventStatus = Literal["committed", "failed"]

_EXPECTATION = pa.struct([("name", pa.string()), ("passed", pa.int64()), ("failed", pa.int64())])
_TIME = pa.timestamp("us", tz="UTC")

#: The event log's columns, in order.
EVENT_LOG_SCHEMA = pa.schema([
    ("run_id", pa.string()),
    ("table", pa.string()),
    ("query_id", pa.string()),
    ("batch_id", pa.int64()),
    ("table_version", pa.int64()),
    ("input_rows", pa.int64()),
    ("output_rows", pa.int64()),
    ("quarantined_rows", pa.int64()),
    ("expectations", pa.list_(_EXPECTATION)),
    ("started_at", _TIME),
    ("duration_ms", pa.int64()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("recorded_at", _TIME),
    ("source_offsets", pa.string()),
])

# Appends of different tables' batches may race (a run's steps write in parallel); delta-rs
# retries a plain append itself, but not the creation of the log.
_ATTEMPTS = 5
#: Appends between two compactions of the log's files (as Delta's log checkpoint interval).
COMPACT_EVERY = 100


def commit_properties(
    operation: str, transaction: AppTransaction | None, rows: int | None, metadata: Mapping[str, Any] | None
) -> CommitProperties:
    """What a delta-rs commit records beside its rows: who wrote it (the operation, query,
    batch and rows, as the Spark writes' ``userMetadata`` says them) and the batch's app
    transaction."""
    custom: dict[str, Any] = {META_OPERATION: operation}
    if rows is not None:
        custom[META_ROWS] = rows
    if transaction is not None:
        custom[META_QUERY] = transaction.app_id
        custom[META_BATCH] = transaction.batch_id
    custom.update(metadata or {})
    return CommitProperties(
        custom_metadata=custom,
        app_transactions=(
            [Transaction(app_id=transaction.app_id, version=transaction.batch_id)] if transaction else None),
    )


@dataclass(frozen=True)
class ExpectationResult:
    """What one rule counted in one batch."""

    name: str
    passed: int
    failed: int


@dataclass(frozen=True)
class BatchEvent:
    """One micro-batch of one table's query (or one batch write, with no query): what it read,
    wrote and quarantined, what its rules counted, when and how long it ran, and how it ended.
    A number nobody measured (a batch recovered after a crash, without Spark's progress) is None."""

    run_id: str | None
    table: str
    query_id: str | None
    batch_id: int | None
    table_version: int | None
    input_rows: int | None
    output_rows: int | None
    quarantined_rows: int | None = None
    expectations: tuple[ExpectationResult, ...] = ()
    started_at: dt.datetime | None = None
    duration_ms: int | None = None
    status: EventStatus = "committed"
    error: str | None = None
    recorded_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    #: The source offsets Spark logged in the checkpoint for the batch (BatchOffsets as JSON):
    #: where its query had read to. Delta's own streaming sink does not record them in the
    #: commit, so the log is where they are kept for its tables.
    source_offsets: str | None = None

    def as_row(self) -> dict[str, Any]:
        """The event as one row of :data:`EVENT_LOG_SCHEMA`."""
        row = {name: getattr(self, name) for name in EVENT_LOG_SCHEMA.names}
        row["expectations"] = [{"name": e.name, "passed": e.passed, "failed": e.failed} for e in self.expectations]
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> BatchEvent:
        """An event read back from the log."""
        expectations = tuple(ExpectationResult(e["name"], int(e["passed"]), int(e["failed"]))
                             for e in row.get("expectations") or ())
        return cls(**{**row, "expectations": expectations})


def event_log_path(root: Location) -> Location:
    """The event log of the lakehouse at ``root``."""
    return LakehouseSettings(root).table_path(SYSTEM_LAYER, EVENT_LOG)


def query_app_id(table: str, query_id: str) -> str:
    """The app transaction under which the batches of ``table``'s query ``query_id`` are logged."""
    return f"{table}#{query_id}"


def last_logged_batch(path: Location, table: str, query_id: str) -> int | None:
    """The newest batch of ``table``'s query ``query_id`` the log holds, or None."""
    log = _open(path)
    return None if log is None else log.transaction_version(query_app_id(table, query_id))


def append_events(path: Location, events: Sequence[BatchEvent], *, logs: AppTransaction | None = None) -> bool:
    """Append ``events`` to the log in one commit. With ``logs`` (the query's app transaction
    and the last batch among the events), events the log already holds are not appended again.
    Whether anything was appended."""
    if not events:
        return False
    rows = pa.Table.from_pylist([e.as_row() for e in events], schema=EVENT_LOG_SCHEMA)
    for attempt in range(_ATTEMPTS):
        log = _open(path)
        if logs is not None and log is not None:
            logged = log.transaction_version(logs.app_id)
            if logged is not None and logged >= logs.batch_id:
                return False
        try:
            # schema_mode: a log written before a column was added gains it.
            write_deltalake(str(path), rows, mode="append", schema_mode="merge", storage_options=path.delta_rs_options,
                            commit_properties=commit_properties("APPEND EVENTS", logs, len(events), None))
            if log is not None and (log.version() + 1) % COMPACT_EVERY == 0:
                _compact(path)
            return True
        except (CommitFailedError, DeltaError) as exc:
            if attempt == _ATTEMPTS - 1:
                raise LakehouseError(
                    f"Could not append {len(events)} event(s) of {events[0].table} to the event log {path}: {exc}. "
                    "The tables themselves are committed; the next run of the table records the missing "
                    "batches.") from exc
            time.sleep(0.05 * (attempt + 1))  # another run committed first: read the log again
    return False


def read_events(path: Location, *, table: str | None = None, run_id: str | None = None) -> list[BatchEvent]:
    """The logged events, oldest first (by table version, then batch), of ``table`` and/or
    ``run_id`` when given."""
    log = _open(path)
    if log is None:
        return []
    wanted = [pc.field(column) == value for column, value in (("table", table), ("run_id", run_id))
              if value is not None]
    where = functools.reduce(operator.and_, wanted) if wanted else None
    events = DeltaRsSnapshot(path, log).to_arrow(where=where)
    rows = [BatchEvent.from_row(row) for row in events.to_pylist()]
    return sorted(rows, key=lambda e: (e.recorded_at, e.table, e.batch_id if e.batch_id is not None else -1))


def logged_offsets(path: Location, table: str) -> dict[tuple[str, int], BatchOffsets]:
    """The source offsets the log holds for ``table``'s batches, by (query id, batch id)."""
    log = _open(path)
    if log is None or "source_offsets" not in log.schema().to_arrow().names:
        return {}
    where = (pc.field("table") == table) & pc.field("source_offsets").is_valid()
    rows = DeltaRsSnapshot(path, log).to_arrow(
        where=where, columns=["query_id", "batch_id", "source_offsets"]).to_pylist()
    # Imported here: checkpoints/ builds on storage/.
    from lakehouse_assets.checkpoints.logs import BatchOffsets

    return {(row["query_id"], int(row["batch_id"])): BatchOffsets.from_json(row["source_offsets"])
            for row in rows if row["query_id"] is not None and row["batch_id"] is not None}


def _compact(path: Location) -> None:
    """Compact the log's small files; skipped when it fails (another run's append got in
    first, say): the next compaction, or the daily maintenance, does it."""
    try:
        DeltaTable(str(path), storage_options=path.delta_rs_options).optimize.compact()
    except DeltaError:
        pass


def _open(path: Location) -> DeltaTable | None:
    try:
        return DeltaTable(str(path), storage_options=path.delta_rs_options)
    except TableNotFoundError:
        return None
