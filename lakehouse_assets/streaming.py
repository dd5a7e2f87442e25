"""Running one incremental Structured Streaming query to completion, and what it did.

Every table in the lakehouse is written by a query started here: with a trigger
(``availableNow`` by default), a checkpoint of its own, and an exactly-once sink (a
``foreachBatch`` function, or Delta's own streaming sink).

What a run reports comes from the table's log (the sink names the run in each commit), never
from objects the sink mutates: on a Spark Connect engine the sink runs, pickled, in a Python
worker of the server. Spark's progress reports only say how a run went (batches, rows dropped
by a watermark), for this run's log.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame
from pyspark.sql.streaming.readwriter import DataStreamWriter

from lakehouse_assets.errors import CorruptCheckpointError, LakehouseError, QueryFailedError, failure_text
from lakehouse_assets.storage.batch_record import Reading
from lakehouse_assets.storage.engine import HistoryEntry
from lakehouse_assets.storage.sink import DeltaStreamSink, RunStamp


class TriggerKind(StrEnum):
    """When a query runs its micro-batches (the Launchpad shows these as a dropdown)."""

    availableNow = "availableNow"
    once = "once"
    processingTime = "processingTime"

    @classmethod
    def parse(cls, value: str) -> TriggerKind:
        """``value`` as a trigger kind; an unknown one is an error that lists the known."""
        try:
            return cls(value)
        except ValueError:
            raise LakehouseError(f"Unknown trigger {value!r}: use availableNow, once or processingTime") from None


@dataclass(frozen=True)
class Trigger:
    """When the query runs its micro-batches.

    ``availableNow`` processes everything that has arrived, in as many micro-batches as the
    source's rate limits ask for, then stops. ``once`` does the same in a single batch.
    ``processingTime`` runs a batch every ``interval`` until ``timeout_seconds`` pass.
    """

    kind: TriggerKind | str = TriggerKind.availableNow
    interval: str = "10 seconds"
    timeout_seconds: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", TriggerKind.parse(self.kind))
        if self.kind == "processingTime" and not self.timeout_seconds:
            raise LakehouseError(
                "A processingTime trigger runs until stopped: give timeout_seconds to bound "
                "how long a materialization keeps it running"
            )


@dataclass
class StreamRun:
    """What one run of a query did."""

    query_id: str | None = None
    #: The run named in the query's commits (a Dagster run's id, or one made up for it).
    run_id: str | None = None
    batches: int = 0
    input_rows: int = 0
    restarts: int = 0
    duration_seconds: float = 0.0
    commits: list[HistoryEntry] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rows_written(self) -> int:
        return sum(c.rows_written or 0 for c in self.commits)

    @property
    def watermarked(self) -> bool:
        """Whether the query has an event-time watermark (``withWatermark``)."""
        return any("watermark" in (p.get("eventTime") or {}) for p in self.progress)

    @property
    def rows_dropped_by_watermark(self) -> int:
        """Rows the query's stateful operators dropped as later than its watermark."""
        return sum(int(p.get("rowsDroppedByWatermark") or 0) for p in self.progress)

    @property
    def last_version(self) -> int | None:
        versions = [c.version for c in self.commits if c.version is not None]
        return max(versions) if versions else None


#: Whether a query that failed with this error should be rebuilt and started again (e.g.
#: after evolving its stored schema to the columns that made it fail).
RestartPolicy = Callable[[BaseException], bool]


class BatchSink(Protocol):
    """A ``foreachBatch`` function that names its run in its commits and reads them back
    (:class:`~lakehouse_assets.storage.DeltaSink`,
    :class:`~lakehouse_assets.quality.quarantine.QuarantineSink`)."""

    @property
    def output_mode(self) -> str: ...

    def __call__(self, batch_df: DataFrame, batch_id: int) -> Any: ...

    def for_run(self, stamp: RunStamp) -> BatchSink: ...

    def run_commits(self) -> list[HistoryEntry]: ...


#: Where a query writes: a ``foreachBatch`` function, or Delta's own streaming sink.
RunSink = BatchSink | DeltaStreamSink


def run_stream(
    build: Callable[[], DataFrame],
    sink: RunSink,
    *,
    checkpoint_location: str,
    trigger: Trigger = Trigger(),
    query_name: str | None = None,
    restart_when: RestartPolicy | None = None,
    max_restarts: int = 3,
    run_id: str | None = None,
    reading: Reading | None = None,
) -> StreamRun:
    """Start the query ``build()`` returns, writing through ``sink``, and wait for it.

    When the query fails with an error ``restart_when`` accepts (for example, its source's
    schema grew), it is built again and restarted from its checkpoint, up to ``max_restarts``
    times, within this one call; and so it is, a few times after a pause, when the Python
    worker of its ``foreachBatch`` function did not start in time (a busy machine).
    ``run_id`` (a Dagster run's id; else a new one) and what the run found its sources at
    (``reading``) are recorded in every commit the sink makes, and the run's commits are read
    back from the table by it.
    """
    run_id = run_id or uuid.uuid4().hex
    run = StreamRun(run_id=run_id)
    sink = sink.for_run(RunStamp(run_id, query_name, reading))
    started = time.monotonic()
    late_workers = 0

    def retry_late_worker(exc: BaseException) -> bool:
        """Whether to start the query again because its worker was late (after a pause)."""
        nonlocal late_workers
        if not _worker_not_started(exc) or late_workers >= _LATE_WORKER_RETRIES:
            return False
        late_workers += 1
        run.restarts += 1
        time.sleep(min(2.0 ** late_workers, 10.0))  # a busy moment may pass
        return True

    while True:
        df = build()
        writer = (
            _stream_writer(df, sink)
            .outputMode(sink.output_mode)
            .option("checkpointLocation", checkpoint_location)
        )
        if query_name:
            writer = writer.queryName(query_name)
        if trigger.kind == "availableNow":
            writer = writer.trigger(availableNow=True)
        elif trigger.kind == "once":
            writer = writer.trigger(once=True)
        else:
            writer = writer.trigger(processingTime=trigger.interval)
        try:
            query = writer.start()
        except Exception as exc:
            if retry_late_worker(exc):
                continue
            _raise_if_checkpoint_damaged(checkpoint_location, exc)
            raise
        run.query_id = str(query.id)
        try:
            if trigger.kind == "processingTime":
                # pyspark takes float seconds here (it sends int(timeout * 1000) ms); its annotation says int.
                query.awaitTermination(trigger.timeout_seconds)  # type: ignore[arg-type]
                query.stop()
            else:
                query.awaitTermination()
        except StreamingQueryException as exc:
            _collect(run, query, sink)
            if retry_late_worker(exc):
                continue
            if restart_when is not None and restart_when(exc) and run.restarts - late_workers < max_restarts:
                run.restarts += 1
                continue
            _raise_if_checkpoint_damaged(checkpoint_location, exc)
            _raise_if_project_error(exc)
            raise
        _collect(run, query, sink)
        break
    run.duration_seconds = time.monotonic() - started
    return run


# What Spark says when a Python worker (a query's foreachBatch function on a Spark Connect
# engine) did not connect back within the 10 s it waits, hard-coded (PythonWorkerFactory): a
# busy machine, not the query. The query starts again (its batch replayed from the checkpoint,
# exactly once), after a pause, this many times: a 2-core machine running two test passes
# and more JVMs beside them once missed the 10 s four times in a row.
_LATE_WORKER_RETRIES = 5
_WORKER_NOT_STARTED = ("Python worker failed to connect back",
                       "Timed out while waiting for the Python worker to connect back")


def _worker_not_started(exc: BaseException) -> bool:
    text = str(exc)
    return any(sign in text for sign in _WORKER_NOT_STARTED)


def _stream_writer(df: DataFrame, sink: RunSink) -> DataStreamWriter:
    """Delta's own streaming sink where ``sink`` is one; else ``sink`` as ``foreachBatch``."""
    if isinstance(sink, DeltaStreamSink):
        return sink.stream_writer(df)
    return df.writeStream.foreachBatch(sink)


# What Spark says when a checkpoint file is damaged (HDFSMetadataLog, StreamMetadata,
# CompactibleFileStreamLog, Hadoop's checksums, Jackson).
# Not the bare word "malformed": every ingestion plan names its `_malformed` column.
_DAMAGE_SIGNS = (
    "Log file was malformed", "ChecksumException", "Checksum error",
    "UNSUPPORTED_LOG_VERSION", "doesn't exist (latestId", "JsonParseException", "JsonMappingException",
    "MismatchedInputException", "Unexpected end-of-input",
    # Bytes that are not UTF-8 where Spark reads a log's text ("Input length = 1").
    "MalformedInputException",
)


def _raise_if_checkpoint_damaged(checkpoint_location: str, exc: BaseException) -> None:
    """Re-raise a query's failure as CorruptCheckpointError when Spark says its checkpoint is
    damaged: Spark's own message is a JVM stack trace that names no way out."""
    text = str(exc)
    # Spark's message may not name the checkpoint ("Unexpected end-of-input in field name"):
    # the JVM stack trace says where it failed, reading the checkpoint's logs.
    trace = _jvm_stack_trace(exc)
    if ("checkpoint" in text.lower() or any(frame in trace for frame in _CHECKPOINT_FRAMES)) and any(
            sign in text or sign in trace for sign in _DAMAGE_SIGNS):
        raise CorruptCheckpointError(
            checkpoint_location, checkpoint_location,
            f"could not be read by Spark ({text.splitlines()[0][:300]})",
            _table_of_checkpoint(checkpoint_location),
        ) from exc


# Where Spark reads a checkpoint's files (its metadata logs, its metadata file).
_CHECKPOINT_FRAMES = (
    "HDFSMetadataLog", "OffsetSeqLog", "CommitLog", "StreamMetadata", "CompactibleFileStreamLog",
    "streaming.checkpointing.",
)


def _jvm_stack_trace(exc: BaseException) -> str:
    """The JVM stack trace a pyspark error carries (classic or Spark Connect), or ""."""
    trace = getattr(exc, "_stackTrace", None)  # classic pyspark keeps it here, unexposed
    if not trace and callable(getattr(exc, "getStackTrace", None)):
        try:
            trace = exc.getStackTrace()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - a description only
            trace = None
    return str(trace or "")


def _table_of_checkpoint(location: str) -> str:
    """``layer.name`` of a checkpoint ``.../_checkpoints/<layer>/<name>``, as the way out names it."""
    return ".".join(location.rstrip("/").split("/")[-2:])


# The last line of a Python traceback that ends in one of the project's own errors.
_PROJECT_ERROR = re.compile(r"^(?:.*\s)?lakehouse_assets(?:\.\w+)*\.(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)


def _raise_if_project_error(exc: BaseException) -> None:
    """Re-raise a query that failed on one of the project's own errors, raised by the sink or
    the source inside the query, as that error's message: it already names the table and what
    to do, where Spark's wraps it in a traceback and a plan dump."""
    found = _PROJECT_ERROR.findall(failure_text(exc))
    if found:
        kind, message = found[-1]
        raise QueryFailedError(kind, message.strip()) from exc


def _collect(run: StreamRun, query: Any, sink: RunSink) -> None:
    """Fold the query's progress reports (one per batch; batch ids go on across restarts)
    and the run's commits, as the table's log records them, into ``run``."""
    by_batch = {p["batchId"]: p for p in run.progress}
    for progress in query.recentProgress:
        entry = {
            "batchId": progress.batchId,
            "timestamp": progress.timestamp,
            "numInputRows": progress.numInputRows,
            "durationMs": dict(progress.durationMs or {}),
            "eventTime": dict(progress.eventTime or {}),
            "rowsDroppedByWatermark": sum(int(op.numRowsDroppedByWatermark or 0)
                                          for op in (progress.stateOperators or [])),
        }
        known = by_batch.get(progress.batchId)
        if known is None or entry["numInputRows"] > known["numInputRows"]:
            by_batch[progress.batchId] = entry
    run.progress = sorted(by_batch.values(), key=lambda p: p["batchId"])
    run.commits = sink.run_commits()
    run.batches = sum(1 for p in run.progress if p["numInputRows"])
    run.input_rows = sum(p["numInputRows"] for p in run.progress)
