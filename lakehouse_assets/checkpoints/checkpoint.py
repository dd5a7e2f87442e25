"""A Structured Streaming checkpoint: the one model every other module asks about it.

:class:`Checkpoint` reads it (every file Spark reads on restart checked as Spark will read
it, by :mod:`~lakehouse_assets.checkpoints.logs`), validates it against the tables
its query writes and reads, reports on it, and repairs it from the tables. A damaged file,
or a checkpoint that disagrees with its tables, stops a run with an error naming the
checkpoint and the way out, where Spark would fail with a stack trace or lose rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakehouse_assets.checkpoints.agreement import check_agreement, check_sources
from lakehouse_assets.checkpoints.logs import (
    BatchOffsets,
    CheckpointState,
    FileLogEntry,
    batch_start_times,
    committed_batches,
    planned_batches,
    read_batch_offsets,
    read_file_source_log,
    read_query_id,
    read_state,
    table_name_of,
)
from lakehouse_assets.errors import CorruptCheckpointError
from lakehouse_assets.location import Location
from lakehouse_assets.storage.engine import HistoryEntry
from lakehouse_assets.storage.sink import OFFSETS_KEY

if TYPE_CHECKING:
    from lakehouse_assets.checkpoints.repair import RepairResult
    from lakehouse_assets.storage.delta import DeltaTableStore


@dataclass(frozen=True)
class CheckpointReport:
    """A checkpoint as ``lakehouse status`` shows it: read and checked as a run reads it,
    or, when a file is damaged, the batch numbers its folders list and what is wrong."""

    table: str  # layer.name
    location: str
    state: CheckpointState | None  # None when damaged, or when there is nothing to resume
    last_planned_batch: int | None
    last_committed_batch: int | None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The ``status --json`` form."""
        state = self.state
        return {"table": self.table, "path": self.location,
                "last_committed_batch": self.last_committed_batch,
                "last_offset_batch": self.last_planned_batch,
                "pending_batch": state.pending_batch if state is not None else None,
                "last_offsets": None if state is None else list(state.source_offsets),
                "query_id": None if state is None else state.query_id,
                "error": self.error}


@dataclass(frozen=True)
class Checkpoint:
    """The checkpoint at ``location`` of the query writing ``table_name`` (``layer.name``;
    by default the last two parts of ``.../_checkpoints/<layer>/<name>``), which errors name
    in their advice."""

    location: str
    table_name: str | None = None

    @property
    def name(self) -> str:
        """The table whose query this checkpoint belongs to, as ``layer.name``."""
        return self.table_name or table_name_of(self.location)

    # -- reading ------------------------------------------------------------------------------
    def state(self) -> CheckpointState | None:
        """The query id, last planned and done batches and last offsets; None when there is
        no checkpoint yet. A damaged file raises
        :class:`~lakehouse_assets.errors.CorruptCheckpointError` naming it and the recovery."""
        return read_state(self.location, self.name)

    def query_id(self) -> str | None:
        """The query's id, or None before its first start."""
        return read_query_id(self.location, self.name)

    def last_committed_batch(self) -> int | None:
        """The newest batch the query finished, or None."""
        done = committed_batches(self.location)
        return done[-1] if done else None

    def batch_offsets(self, batch_id: int) -> BatchOffsets | None:
        """What Spark logged before running ``batch_id``; None when missing or unreadable."""
        return read_batch_offsets(self.location, batch_id)

    def batch_start_times(self) -> dict[int, dt.datetime]:
        """When each batch still in the offset log started."""
        return batch_start_times(self.location)

    def file_source_log(self, source: int = 0) -> list[FileLogEntry]:
        """Every file the file source ``source`` assigned to a batch, by batch then path."""
        return read_file_source_log(self.location, source, self.name)

    # -- validating ---------------------------------------------------------------------------
    def validate(self, table_paths: Sequence[str], store: DeltaTableStore) -> CheckpointState | None:
        """Read the checkpoint and check it against every table its query writes (a routed
        query writes two); the state, or None when there is no checkpoint."""
        state = self.state()
        if state is not None:
            for path in table_paths:
                check_agreement(state, path, store, self.name)
        return state

    def check_sources(self, state: CheckpointState, store: DeltaTableStore, root: Location | None = None) -> None:
        """Raise when a Delta table the query reads is gone or was recreated since its last
        batch; ``root`` lets the message name the upstream table as ``layer.name``."""
        check_sources(state, store, self.name, root)

    # -- reporting and repairing --------------------------------------------------------------
    def report(self) -> CheckpointReport:
        """The checkpoint for a report: one damaged checkpoint is described, not raised, so
        it does not hide the others."""
        try:
            state = self.state()
        except CorruptCheckpointError as exc:
            planned, committed = planned_batches(self.location), committed_batches(self.location)
            return CheckpointReport(self.name, self.location, None, planned[-1] if planned else None,
                                    committed[-1] if committed else None, str(exc))
        if state is None:
            return CheckpointReport(self.name, self.location, None, None, None)
        return CheckpointReport(self.name, self.location, state, state.last_planned_batch,
                                state.last_committed_batch)

    def repair(self, store: DeltaTableStore, table_paths: Sequence[str], *, source_file_column: str,
               logged_offsets: Mapping[tuple[str, int], BatchOffsets] | None = None) -> RepairResult:
        """Rebuild the checkpoint from what its tables (and the event log's
        ``logged_offsets``) record, the old one moved aside; see
        :func:`~lakehouse_assets.checkpoints.repair.repair_checkpoint`."""
        from lakehouse_assets.checkpoints.repair import repair_checkpoint

        return repair_checkpoint(store, self.location, table_paths, table_name=self.name,
                                 source_file_column=source_file_column, logged_offsets=logged_offsets)


def recorded_offsets(commit: HistoryEntry,
                     logged: Mapping[tuple[str, int], BatchOffsets] | None = None) -> BatchOffsets | None:
    """The checkpoint offsets of a batch's commit: as the commit recorded them, else as the
    event log did (``logged``, by query and batch: Delta's own sink records none in the
    commit); None for a commit that is not a streaming batch's, or predates both records."""
    if commit.batch_id is None:
        return None
    text = commit.custom_metadata.get(OFFSETS_KEY)
    if text:
        return BatchOffsets.from_json(str(text))
    return (logged or {}).get((str(commit.query), commit.batch_id))


__all__ = ["BatchOffsets", "Checkpoint", "CheckpointReport", "CheckpointState", "FileLogEntry", "recorded_offsets"]
