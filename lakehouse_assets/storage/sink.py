"""Exactly-once Delta sinks for Structured Streaming.

Each commit records ``(query id, batch id)`` as a Delta app transaction, so a batch Spark replays
after a crash is skipped when the table holds it. :class:`DeltaSink` is a ``foreachBatch``
function (counts per batch; complete, merged, two tables per batch); :class:`DeltaStreamSink` is
Delta Lake's own streaming sink, for a query appending to one table and counting nothing.
The sinks keep no state: on a Spark Connect engine a ``foreachBatch`` function runs pickled in
the server's Python worker, so a batch asks Spark for its query's id (:func:`batch_query_id`),
and what a run wrote is read back from the table's log (:func:`run_commits`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

from pyspark.sql import DataFrame
from pyspark.sql.streaming.readwriter import DataStreamWriter

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.spark_conf import is_connect_session
from lakehouse_assets.storage.batch_record import (
    OUTPUT_MODE_KEY,
    READING_KEY,
    READS_FILES_KEY,
    RUN_KEY,
    STARTED_KEY,
    Reading,
)
from lakehouse_assets.storage.declared_types import DeclaredTypes
from lakehouse_assets.storage.engine import AppTransaction, CommitResult, HistoryEntry
from lakehouse_assets.storage.history import newest_first
from lakehouse_assets.storage.layout import TableLayout

if TYPE_CHECKING:
    from lakehouse_assets.storage.delta import DeltaTableStore

OutputMode = Literal["append", "complete", "update"]

# The local property Spark's stream thread sets to the query's id (StreamExecution.QUERY_ID_KEY).
_QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass(frozen=True)
class RunStamp:
    """What every commit of one run's query records besides its batch: the run (a Dagster
    run's id, or one made up for it), the query's name (how a batch finds its query's id),
    and what the run read before it started."""

    run_id: str
    query_name: str | None = None
    reading: Reading | None = None

    def metadata(self) -> dict[str, str]:
        """The commit metadata recording the stamp."""
        stamped = {RUN_KEY: self.run_id}
        if self.reading is not None:
            stamped[READING_KEY] = self.reading.to_json()
        return stamped


def batch_query_id(batch_df: DataFrame, query_name: str | None) -> str:
    """The id of the streaming query whose ``foreachBatch`` function got ``batch_df``: it
    persists across restarts from the same checkpoint, and a new checkpoint gets a new one, so
    it names the query's batches in its commits. Asked of Spark: the stream thread's local
    property on an embedded driver; on a Spark Connect engine, the session's active query of
    that name, or its only active query (the function runs in a worker attached to the
    query's session)."""
    spark = batch_df.sparkSession
    if not is_connect_session(spark):
        property_value = spark.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)
        if property_value:
            return str(property_value)
    else:
        active = spark.streams.active
        named = [query for query in active if query_name and query.name == query_name]
        # An unnamed query is found when it is its session's only one (a run's session runs
        # its queries one at a time).
        queries = named or (active if not query_name and len(active) == 1 else [])
        if queries:
            return str(queries[0].id)
    raise LakehouseError(
        f"The streaming query {query_name or '(unnamed)'} has no id to name its commits by: run the sink "
        "as a named query's foreachBatch function (run_stream does).")


class TableSink(Protocol):
    """A ``foreachBatch`` function committing each batch to a table once, recording
    ``commit_metadata`` in the commit (:class:`DeltaSink`, and the sinks built on it)."""

    @property
    def output_mode(self) -> str: ...

    def __call__(self, batch_df: DataFrame, batch_id: int,
                 commit_metadata: Mapping[str, str] | None = None) -> CommitResult: ...

    def for_run(self, stamp: RunStamp) -> TableSink: ...

    def run_commits(self) -> list[HistoryEntry]: ...


@dataclass
class DeltaSink:
    """Writes each micro-batch to the table at ``path`` in one idempotent commit.

    Output modes: ``append`` adds the batch's rows; ``complete`` replaces the table's
    contents with the batch atomically; ``update`` merges the batch into the table by
    ``keys``. ``stamp`` names the run in every commit (see :meth:`for_run`); the table is
    created with ``layout`` (properties, partition or clustering columns), and each batch's
    columns are cast to the ``declared`` types its definition gives them.
    """

    store: DeltaTableStore
    path: str
    output_mode: OutputMode = "append"
    keys: Sequence[str] = ()
    merge_schema: bool = False
    stamp: RunStamp | None = None
    layout: TableLayout = field(default_factory=TableLayout)
    declared: DeclaredTypes | None = None

    def __post_init__(self) -> None:
        if self.output_mode not in ("append", "complete", "update"):
            raise LakehouseError(
                f"Unknown output mode {self.output_mode!r} for {self.path}: use append, complete or update"
            )
        if self.output_mode == "update" and not self.keys:
            raise LakehouseError(f"Output mode 'update' into {self.path} needs key columns to merge on")
        self._query_id: str | None = None

    def for_run(self, stamp: RunStamp) -> DeltaSink:
        """This sink, recording ``stamp`` in its commits."""
        return replace(self, stamp=stamp)

    def run_commits(self) -> list[HistoryEntry]:
        """What this sink's run committed to its table, oldest first, read from the log."""
        return run_commits(self.store, self.path, self.stamp.run_id) if self.stamp else []

    def __call__(self, batch_df: DataFrame, batch_id: int,
                 commit_metadata: Mapping[str, str] | None = None) -> CommitResult:
        """Commit the batch, once; ``commit_metadata`` is recorded in its commit (what the
        batch's expectations counted, for one)."""
        fault_point("batch.started")
        transaction, metadata = self.batch_commit(batch_df, batch_id, commit_metadata)
        if self.output_mode == "update":
            result = self.store.merge(
                batch_df, self.path, keys=self.keys, merge_schema=self.merge_schema, transaction=transaction,
                metadata=metadata, layout=self.layout, declared=self.declared,
            )
        else:
            result = self.store.write(
                batch_df,
                self.path,
                mode="append" if self.output_mode == "append" else "overwrite",
                merge_schema=self.merge_schema,
                overwrite_schema=self.output_mode == "complete",
                transaction=transaction,
                operation="STREAMING UPDATE",
                metadata=metadata,
                layout=self.layout,
                declared=self.declared,
            )
        if result.skipped:
            # A replayed batch the table already holds. Spark still expects the batch's plan to
            # run: a stateful query (an aggregation) commits its state store only when its
            # DataFrame is consumed, and Spark 4 fails the batch otherwise
            # (STATE_STORE_COMMIT_VALIDATION_FAILED). Consume it without writing anything.
            batch_df.write.format("noop").mode("overwrite").save()
        return result

    def batch_commit(self, batch_df: DataFrame, batch_id: int,
                     commit_metadata: Mapping[str, str] | None = None) -> tuple[AppTransaction, dict[str, str]]:
        """What every commit of batch ``batch_id`` records: its app transaction (the query's
        id and the batch), and metadata naming the output mode, the run, what the run read and
        when the batch started."""
        if self._query_id is None:
            self._query_id = batch_query_id(batch_df, self.stamp.query_name if self.stamp else None)
        metadata: dict[str, str] = {**(commit_metadata or {}), OUTPUT_MODE_KEY: self.output_mode,
                                    STARTED_KEY: dt.datetime.now(dt.UTC).isoformat()}
        if self.stamp is not None:
            metadata.update(self.stamp.metadata())
        return AppTransaction(self._query_id, int(batch_id)), metadata


@dataclass
class DeltaStreamSink:
    """Appends each micro-batch to the table at ``path`` through Delta Lake's own streaming
    sink, for a query that appends to one table and counts nothing per batch, exactly once as
    :class:`DeltaSink` is (Delta records each batch's app transaction). No Python runs per
    batch; the commits carry what every batch of the query shares (output mode, the run's
    stamp), not per-batch counts or times. A query that ``reads_files`` says so (its rows read
    are its rows written); ``layout`` and ``declared`` as :class:`DeltaSink`'s.
    """

    store: DeltaTableStore
    path: str
    merge_schema: bool = False
    reads_files: bool = False
    stamp: RunStamp | None = None
    layout: TableLayout = field(default_factory=TableLayout)
    declared: DeclaredTypes | None = None

    @property
    def output_mode(self) -> str:
        return "append"

    def for_run(self, stamp: RunStamp) -> DeltaStreamSink:
        """This sink, recording ``stamp`` in its commits."""
        return replace(self, stamp=stamp)

    def run_commits(self) -> list[HistoryEntry]:
        """What this sink's run committed to its table, oldest first, read from the log."""
        return run_commits(self.store, self.path, self.stamp.run_id) if self.stamp else []

    def stream_writer(self, df: DataFrame) -> DataStreamWriter:
        """``df``'s stream writer into the table (checkpoint and trigger still to set)."""
        metadata = {OUTPUT_MODE_KEY: self.output_mode, **(self.stamp.metadata() if self.stamp else {})}
        if self.reads_files:
            metadata[READS_FILES_KEY] = "true"
        return self.store.stream_writer(df, self.path, merge_schema=self.merge_schema, layout=self.layout,
                                        metadata=metadata, declared=self.declared)


def run_commits(store: DeltaTableStore, path: str, run_id: str) -> list[HistoryEntry]:
    """The commits run ``run_id`` made to the table at ``path``, oldest first.

    A table has one writer at a time (its lock), so right after a run its commits are the
    newest ones carrying its id; the log is read newest first until an older run's commit
    shows up. Ask before another run writes the table.
    """
    found: list[HistoryEntry] = []
    for entry in newest_first(store, path):
        if entry.run_id != run_id:
            break
        found.append(entry)
    return found[::-1]
