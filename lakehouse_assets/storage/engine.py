"""What the rest of the project needs from table storage, independent of the Delta engine.

:class:`TableStore` is implemented by :class:`~lakehouse_assets.storage.delta_rs.DeltaTableStore`
(Spark computes, delta-rs commits). A store backed by delta-spark's own jars could implement the
same protocol where those jars can be installed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.readwriter import DataStreamWriter

from lakehouse_assets.storage.declared_types import DeclaredTypes
from lakehouse_assets.storage.layout import TableLayout

if TYPE_CHECKING:
    import pyarrow as pa

#: How a batch is written: appended, overwriting the table, or merged (upserted) by keys.
#: :meth:`TableStore.write` appends and overwrites; :meth:`TableStore.merge` merges.
WriteMode = Literal["append", "overwrite", "merge"]


#: Commit metadata keys that describe a batch's rows (what its expectations counted) start
#: with this: only the commit that writes the rows records them, never a schema change made
#: for them, so summing a run's commits counts each batch once.
BATCH_METADATA_PREFIX = "lakehouse.batch."

@dataclass(frozen=True)
class AppTransaction:
    """A streaming query's micro-batch, recorded in the commit that writes it (Delta's
    ``txn`` action: ``appId`` and ``version``), so a replay of the batch is recognised."""

    app_id: str
    batch_id: int

    def held_by(self, store: TableStore, path: str) -> bool:
        """Whether the table at ``path`` has committed this batch (or a later one of its query)."""
        committed = store.committed_batch(path, self.app_id) if store.exists(path) else None
        return committed is not None and committed >= self.batch_id


@dataclass(frozen=True)
class CommitResult:
    """What one write did. ``version`` is None when nothing was committed: the batch was
    already committed (``skipped``), or it held no rows for an existing table and belonged to
    no query (a query's empty batch still commits, to record its app transaction)."""

    path: str
    version: int | None
    rows_written: int = 0
    skipped: bool = False
    #: The commit's custom metadata (``commitInfo``), as far as it was read back.
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HistoryEntry:
    """One row of ``DESCRIBE HISTORY``."""

    version: int
    timestamp: dt.datetime
    operation: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    rows_written: int | None = None
    query: str | None = None
    batch_id: int | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    # The commit's lakehouse.* custom metadata (e.g. the checkpoint offsets of a batch).
    custom_metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamOptions:
    """Options of a table read as a stream, as Delta's source names them: where a new query
    starts (``startingVersion``), how much one micro-batch takes (``maxFilesPerTrigger``,
    ``maxBytesPerTrigger``: whichever is reached first, and at least one file), and what to do
    with commits that remove rows (``skipChangeCommits``: skip any; ``ignoreDeletes``: skip
    those that only delete; otherwise the stream stops on them), or whether to read the
    table's change data feed instead (``readChangeFeed``: every insert, update and delete,
    with ``_change_type``, ``_commit_version`` and ``_commit_timestamp``)."""

    starting_version: int | None = None
    max_files_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    skip_change_commits: bool = False
    ignore_deletes: bool = False
    read_change_feed: bool = False

    def reader_options(self) -> dict[str, str]:
        """The options as Delta's source spells them, those set only."""
        given = {
            "startingVersion": self.starting_version,
            "maxFilesPerTrigger": self.max_files_per_trigger,
            "maxBytesPerTrigger": self.max_bytes_per_trigger,
            "skipChangeCommits": self.skip_change_commits or None,
            "ignoreDeletes": self.ignore_deletes or None,
            "readChangeFeed": self.read_change_feed or None,
        }
        return {name: str(value).lower() if isinstance(value, bool) else str(value)
                for name, value in given.items() if value is not None}


@dataclass(frozen=True)
class SnapshotFile:
    """A data file of a table version, with the size and row count its log states."""

    path: str  # absolute, as the file system names it
    relative_path: str  # as the log lists it
    size: int | None
    num_records: int | None


@dataclass(frozen=True)
class StreamReader:
    """A streaming query reading a table: where its checkpoint is, the table it writes
    (``layer.name``, as its checkpoint folder names it), and the position it resumes from
    (its Delta source offset: the table version, and the file index within it)."""

    checkpoint: str
    name: str
    version: int
    index: int = -1
    snapshot: bool = False


@dataclass(frozen=True)
class OptimizeResult:
    """What one compaction (OPTIMIZE) did. ``version`` is None when there was nothing to
    compact; its commit adds and removes files with ``dataChange=false``, so streams reading
    the table skip it."""

    path: str
    version: int | None
    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    z_order: tuple[str, ...] = ()


@dataclass(frozen=True)
class VacuumResult:
    """What one VACUUM deleted (or, in a dry run, would delete): data files the table stopped
    listing longer ago than ``retention``, with the stream readers it checked first."""

    path: str
    retention: dt.timedelta
    dry_run: bool
    files: tuple[str, ...] = ()  # as the table names them, relative to its folder
    bytes: int = 0
    readers: tuple[StreamReader, ...] = ()


class TableSnapshot(Protocol):
    """One version of a table, read without Spark: what commands, checks and run metadata
    need (rows, files, statistics) in a process that has no Spark session."""

    path: str
    version: int

    def column_names(self) -> list[str]:
        """The table's columns at this version."""
        ...

    def schema(self) -> T.StructType:
        """The table's schema at this version, as Spark types."""
        ...

    def files(self) -> list[SnapshotFile]:
        """The data files of this version."""
        ...

    def row_count(self) -> int | None:
        """Rows at this version, from the log's per-file statistics (no data file is read);
        None when a file has no row count, since a partial sum would look exact."""
        ...

    def to_arrow(self, columns: Sequence[str] | None = None, *, limit: int | None = None) -> pa.Table:
        """The rows (all columns, or ``columns``), the first ``limit`` of them if given."""
        ...


class TableStore(Protocol):
    """Batch and streaming access to tables at storage paths."""

    def exists(self, path: str) -> bool:
        """Whether a table has been created at ``path``."""
        ...

    def version(self, path: str) -> int | None:
        """The table's latest version, or None when there is no table."""
        ...

    def schema(self, path: str) -> Any:
        """The table's Spark schema (``StructType``)."""
        ...

    def read(self, spark: SparkSession, path: str, *, version: int | None = None) -> DataFrame:
        """The table as a batch DataFrame, at its latest version or at ``version``."""
        ...

    def read_stream(self, spark: SparkSession, path: str, options: StreamOptions | None = None) -> DataFrame:
        """The table as a streaming DataFrame: the rows of each newly committed version, once."""
        ...

    def write(
        self,
        df: DataFrame,
        path: str,
        *,
        mode: WriteMode = "append",
        merge_schema: bool = False,
        overwrite_schema: bool = False,
        transaction: AppTransaction | None = None,
        operation: str = "WRITE",
        metadata: Mapping[str, Any] | None = None,
        layout: TableLayout | None = None,
        declared: DeclaredTypes | None = None,
    ) -> CommitResult:
        """Append to or overwrite the table in one commit; ``layout``: the properties and
        partition or clustering columns it is created with (properties and clustering are
        given to it if it lacks them); the rows' columns are cast to the ``declared`` types
        first."""
        ...

    def stream_writer(self, df: DataFrame, path: str, *, merge_schema: bool = False,
                      layout: TableLayout | None = None,
                      metadata: Mapping[str, Any] | None = None,
                      declared: DeclaredTypes | None = None) -> DataStreamWriter:
        """The streaming DataFrame's writer into the table through the format's own
        exactly-once streaming sink, its rows fitted to the table as :meth:`write` fits a
        batch's; ``metadata`` recorded in every batch's commit."""
        ...

    def merge(
        self,
        df: DataFrame,
        path: str,
        *,
        keys: Sequence[str],
        replacing: DataFrame | None = None,
        within_range: Sequence[str] = (),
        merge_schema: bool = False,
        transaction: AppTransaction | None = None,
        operation: str = "MERGE",
        metadata: Mapping[str, Any] | None = None,
        layout: TableLayout | None = None,
        declared: DeclaredTypes | None = None,
    ) -> CommitResult:
        """Upsert rows by ``keys`` in one commit: update matches, insert the rest; with
        ``replacing`` (groups by some key columns), delete the rows of those groups the
        batch has none for. ``within_range`` bounds the search to the batch's range of
        those columns. A table keeping a change data feed records the row changes."""
        ...

    def stream_has_unread_data(self, checkpoint_location: str, root: str | None = None) -> bool | None:
        """Whether a query reading tables of this store under ``root``, checkpointed at
        ``checkpoint_location``, has committed data it has not read; None when unknown."""
        ...

    def table_id(self, path: str) -> str | None:
        """The id of the table at ``path`` (a new one each time a table is created there),
        or None when there is no table."""
        ...

    def committed_batch(self, path: str, app_id: str) -> int | None:
        """The last batch id committed by ``app_id``, or None."""
        ...

    def history(self, path: str, *, limit: int | None = None) -> list[HistoryEntry]:
        """The table's commits, newest first."""
        ...

    def snapshot(self, path: str, *, version: int | None = None) -> TableSnapshot:
        """The table at its latest version, or at ``version``, for reading without Spark."""
        ...

    def optimize(self, spark: SparkSession, path: str, *, target_size: int | None = None,
                 z_order: Sequence[str] | None = None) -> OptimizeResult:
        """Compact the table's small files (bin-packing to about ``target_size`` bytes), or
        with ``z_order`` rewrite them clustered by those columns, in one commit that changes
        no rows (``dataChange=false``)."""
        ...

    def vacuum(self, spark: SparkSession, path: str, *, retention: dt.timedelta, dry_run: bool,
               readers: Sequence[StreamReader]) -> VacuumResult:
        """Delete data files the table stopped listing more than ``retention`` ago (list
        them only, with ``dry_run``); refuse when one of ``readers`` still needs one."""
        ...

    def drop(self, path: str) -> None:
        """Delete the table and its files (for a full refresh)."""
        ...
