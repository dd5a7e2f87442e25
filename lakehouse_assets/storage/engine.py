"""The records table storage deals in: an app transaction, what a write did
(:class:`CommitResult`), a commit of the history, a stream's options, a snapshot's files and
what maintenance did. The store itself is :class:`~lakehouse_assets.storage.delta.DeltaTableStore`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lakehouse_assets.storage.batch_record import READING_KEY, RUN_KEY, STARTED_KEY, Reading

#: How a batch is written: appended, overwriting the table, or merged (upserted) by keys.
#: :meth:`DeltaTableStore.write` appends and overwrites; :meth:`DeltaTableStore.merge` merges.
WriteMode = Literal["append", "overwrite", "merge"]


@dataclass(frozen=True)
class AppTransaction:
    """A streaming query's micro-batch, recorded in the commit that writes it (Delta's
    ``txn`` action: ``appId`` and ``version``), so a replay of the batch is recognised."""

    app_id: str
    batch_id: int


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
    """One row of ``DESCRIBE HISTORY``: a commit, with what the lakehouse recorded in it
    (:mod:`~lakehouse_assets.storage.batch_record`)."""

    version: int
    timestamp: dt.datetime
    operation: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    rows_written: int | None = None
    query: str | None = None
    batch_id: int | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    #: The commit's ``lakehouse.*`` metadata.
    custom_metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> str | None:
        """The run whose query (or write) made the commit."""
        run = self.custom_metadata.get(RUN_KEY)
        return str(run) if run else None

    @property
    def reading(self) -> Reading | None:
        """What the run that made the commit read (None for a commit that does not say)."""
        text = self.custom_metadata.get(READING_KEY)
        return Reading.from_json(str(text)) if text else None

    @property
    def started_at(self) -> dt.datetime | None:
        """When the batch's function started (a ``foreachBatch`` batch's commit records it)."""
        text = self.custom_metadata.get(STARTED_KEY)
        return dt.datetime.fromisoformat(str(text)) if text else None


@dataclass(frozen=True)
class StreamOptions:
    """Options of a table read as a stream, as Delta's source names them (``startingVersion``,
    ``maxFilesPerTrigger``, ``maxBytesPerTrigger``, ``skipChangeCommits``, ``ignoreDeletes``,
    ``readChangeFeed``) and means them."""

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
    """A streaming query reading a table: the table it writes (``layer.name``), where its
    checkpoint is, and the newest version of the table it has read whole (as its table's last
    materialization recorded it); None when no record says, so it may need any version."""

    name: str
    version: int | None
    checkpoint: str = ""


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
