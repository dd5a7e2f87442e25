"""Exactly-once Delta sinks for Structured Streaming.

Spark replays a micro-batch after a crash when its offsets were logged but the batch was
not marked done in the checkpoint. Each commit records ``(query id, batch id)`` as a Delta
app transaction, so a replayed batch that the table already holds is skipped: the table
changes exactly once per batch whatever happens between the commit and the checkpoint.

:class:`DeltaSink` is a ``foreachBatch`` function: it records each batch's checkpoint
offsets and counts in its commit, and it writes tables the way the others are kept
(complete, merged, two tables per batch). :class:`DeltaStreamSink` is Delta Lake's own
streaming sink, for a query appending to one table with nothing counted per batch.

The sinks keep no state of their own: on a Spark Connect engine a ``foreachBatch`` function
is pickled into a Python worker of the server, and nothing it remembers would come back.
Each commit also names the run that made it, so what a run wrote is read back from the
table's log (:func:`run_commits`): the table is the one record of what a run did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

from pyspark.sql import DataFrame
from pyspark.sql.streaming.readwriter import DataStreamWriter

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.storage.declared_types import DeclaredTypes
from lakehouse_assets.storage.engine import AppTransaction, CommitResult
from lakehouse_assets.storage.history import newest_first
from lakehouse_assets.storage.layout import TableLayout

if TYPE_CHECKING:
    from lakehouse_assets.checkpoints.checkpoint import Checkpoint
    from lakehouse_assets.storage.delta import DeltaTableStore

OutputMode = Literal["append", "complete", "update"]

# Commit metadata keys: the output mode, and what Spark logged for the batch in the checkpoint
# (BatchOffsets as JSON), so a damaged checkpoint can be rebuilt from the table.
OUTPUT_MODE_KEY = "lakehouse.outputMode"
OFFSETS_KEY = "lakehouse.checkpointOffsets"
# The run (a Dagster run id, or one a stream run made up) whose query made the commit.
RUN_KEY = "lakehouse.runId"
# Set on the commits of a query that reads landed files and appends through Delta's own
# sink, which records no per-batch offsets: the table's files column says what was read.
READS_FILES_KEY = "lakehouse.readsFiles"


class TableSink(Protocol):
    """A ``foreachBatch`` function committing each batch to a table once, recording
    ``commit_metadata`` in the commit (:class:`DeltaSink`, and the sinks built on it)."""

    @property
    def output_mode(self) -> str: ...

    def __call__(self, batch_df: DataFrame, batch_id: int,
                 commit_metadata: Mapping[str, str] | None = None) -> CommitResult: ...

    def for_run(self, run_id: str) -> TableSink: ...

    def run_commits(self) -> list[CommitResult]: ...


@dataclass
class DeltaSink:
    """Writes each micro-batch to the table at ``path`` in one idempotent commit.

    Output modes: ``append`` adds the batch's rows; ``complete`` replaces the table's
    contents with the batch atomically; ``update`` merges the batch into the table by
    ``keys``. ``run_id`` names the run in every commit (see :meth:`for_run`); the table is
    created with ``layout`` (properties, partition or clustering columns), and each batch's
    columns are cast to the ``declared`` types its definition gives them.
    """

    store: DeltaTableStore
    path: str
    checkpoint_location: str
    output_mode: OutputMode = "append"
    keys: Sequence[str] = ()
    merge_schema: bool = False
    run_id: str | None = None
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

    def for_run(self, run_id: str) -> DeltaSink:
        """This sink, naming ``run_id`` in its commits."""
        return replace(self, run_id=run_id)

    def run_commits(self) -> list[CommitResult]:
        """What this sink's run committed to its table, oldest first, read from the log."""
        return run_commits(self.store, self.path, self.run_id) if self.run_id else []

    def __call__(self, batch_df: DataFrame, batch_id: int,
                 commit_metadata: Mapping[str, str] | None = None) -> CommitResult:
        """Commit the batch, once; ``commit_metadata`` is recorded in its commit (what the
        batch's expectations counted, for one)."""
        fault_point("batch.started")
        transaction, metadata = self.batch_commit(batch_id, commit_metadata)
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

    def batch_commit(self, batch_id: int,
                     commit_metadata: Mapping[str, str] | None = None) -> tuple[AppTransaction, dict[str, str]]:
        """What every commit of batch ``batch_id`` records: its app transaction, and metadata
        naming the output mode, the run and the checkpoint offsets Spark logged for it."""
        transaction = AppTransaction(self.query_id(), int(batch_id))
        metadata: dict[str, str] = {**(commit_metadata or {}), OUTPUT_MODE_KEY: self.output_mode}
        if self.run_id:
            metadata[RUN_KEY] = self.run_id
        # Spark logged the batch's offsets before calling us; they are always there.
        offsets = _checkpoint(self.checkpoint_location).batch_offsets(int(batch_id))
        if offsets is not None:
            metadata[OFFSETS_KEY] = offsets.to_json()
        return transaction, metadata

    def query_id(self) -> str:
        """The streaming query's id, from its checkpoint: it names the query's commits."""
        if self._query_id is None:
            # Spark writes the metadata file before the first batch, so a batch always has it.
            query_id = _checkpoint(self.checkpoint_location).query_id()
            if query_id is None:
                raise LakehouseError(
                    f"Checkpoint {self.checkpoint_location} has no metadata file, so the query writing "
                    f"{self.path} has no id to name its commits by. Run the sink from a streaming query "
                    "(foreachBatch) with this checkpoint location.")
            self._query_id = query_id
        return self._query_id


@dataclass
class DeltaStreamSink:
    """Appends each micro-batch to the table at ``path`` through Delta Lake's own streaming
    sink, for a query that appends to one table and counts nothing per batch (an ingestion
    without expectations, a windowed aggregate, a change feed's log).

    Exactly once as :class:`DeltaSink` is: Delta records each batch as the app transaction
    (query id, batch id) of its commit and skips a replay the table holds. No Python runs per
    batch, so on an engine no Python worker starts for the query. The commits carry what
    every batch of the query shares (output mode, run; Delta's sink fixes that text per
    query), not the batch's offsets: the event log keeps those. A query that ``reads_files``
    says so, for its checkpoint to be rebuilt from the files its table holds rows of. The
    table is created with ``layout``; rows are fitted to the
    ``declared`` types and to the table as every write fits them (a type that fits cast to
    the column's, another refused by name).
    """

    store: DeltaTableStore
    path: str
    merge_schema: bool = False
    reads_files: bool = False
    run_id: str | None = None
    layout: TableLayout = field(default_factory=TableLayout)
    declared: DeclaredTypes | None = None

    @property
    def output_mode(self) -> str:
        return "append"

    def for_run(self, run_id: str) -> DeltaStreamSink:
        """This sink, naming ``run_id`` in its commits."""
        return replace(self, run_id=run_id)

    def run_commits(self) -> list[CommitResult]:
        """What this sink's run committed to its table, oldest first, read from the log."""
        return run_commits(self.store, self.path, self.run_id) if self.run_id else []

    def stream_writer(self, df: DataFrame) -> DataStreamWriter:
        """``df``'s stream writer into the table (checkpoint and trigger still to set)."""
        metadata = {OUTPUT_MODE_KEY: self.output_mode}
        if self.reads_files:
            metadata[READS_FILES_KEY] = "true"
        if self.run_id:
            metadata[RUN_KEY] = self.run_id
        return self.store.stream_writer(df, self.path, merge_schema=self.merge_schema, layout=self.layout,
                                        metadata=metadata, declared=self.declared)


class KeptTable(Protocol):
    """A table kept from each batch by its own rules (an AUTO CDC table, an incremental
    aggregate): :meth:`apply` commits one batch once, by its app transaction."""

    def apply(self, rows: DataFrame, transaction: AppTransaction, metadata: Mapping[str, str]) -> CommitResult: ...


@dataclass
class KeptTableSink:
    """A ``foreachBatch`` function handing each micro-batch to :attr:`table`'s ``apply``,
    with ``sink``'s exactly-once commit identity (query id, run id, offsets). Subclasses say
    which table keeps the batches."""

    sink: DeltaSink

    @property
    def output_mode(self) -> str:
        return self.sink.output_mode

    @property
    def table(self) -> KeptTable:
        raise NotImplementedError

    def for_run(self, run_id: str) -> KeptTableSink:
        """This sink, naming ``run_id`` in its commits."""
        return replace(self, sink=self.sink.for_run(run_id))

    def run_commits(self) -> list[CommitResult]:
        """What this sink's run committed to the table (not its state), from the table's log."""
        return self.sink.run_commits()

    def __call__(self, batch_df: DataFrame, batch_id: int,
                 commit_metadata: Mapping[str, str] | None = None) -> CommitResult:
        """Apply the batch, once."""
        fault_point("batch.started")
        transaction, metadata = self.sink.batch_commit(batch_id, commit_metadata)
        return self.table.apply(batch_df, transaction, metadata)


def _checkpoint(location: str) -> Checkpoint:
    # Imported here: checkpoints/ builds on storage/ (its store, history and this module's keys).
    from lakehouse_assets.checkpoints.checkpoint import Checkpoint

    return Checkpoint(location)


def run_commits(store: DeltaTableStore, path: str, run_id: str) -> list[CommitResult]:
    """The commits run ``run_id`` made to the table at ``path``, oldest first.

    A table has one writer at a time (its lock), so right after a run its commits are the
    newest ones carrying its id; the log is read newest first until an older run's commit
    shows up. Ask before another run writes the table.
    """
    found: list[CommitResult] = []
    for entry in newest_first(store, path):
        if entry.custom_metadata.get(RUN_KEY) != run_id:
            break
        found.append(CommitResult(path, entry.version, rows_written=entry.rows_written or 0,
                                  metadata={k: str(v) for k, v in entry.custom_metadata.items()}))
    return found[::-1]
