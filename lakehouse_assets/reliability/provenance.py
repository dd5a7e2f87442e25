"""Where a row came from: its landing file and line, and the table versions that carried it.

Every bronze, silver and quarantined row keeps ``_source_file`` and ``_source_line``. The
versions that carried it are read from the tables' logs, as the freshness check reads them:
bronze's query assigned the file to a batch (its checkpoint's file log), the batch was
committed as one bronze version, and each table above committed the first batch whose
offsets had read that version whole. A table's source is found the same way, from the
offsets its newest batch commit records (each names the table it read by its Delta table id), so nothing about the
graph is declared twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.aggregates import IncrementalAggregate
from lakehouse_assets.aggregates.sink import AGGREGATE_KEY
from lakehouse_assets.checkpoints.checkpoint import BatchOffsets, Checkpoint, recorded_offsets
from lakehouse_assets.checkpoints.delta_offsets import delta_source_end
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.ingestion.files import local_file_path
from lakehouse_assets.settings import SYSTEM_DIR, SYSTEM_LAYER
from lakehouse_assets.storage import HistoryEntry
from lakehouse_assets.storage.discovery import tables_by_id
from lakehouse_assets.storage.event_log import event_log_path, logged_offsets
from lakehouse_assets.tables.lakehouse_tables import LakehouseTables


@dataclass(frozen=True)
class Carrier:
    """One table version that carried a row on its way (None: the logs no longer tell)."""

    table: str
    version: int | None


@dataclass(frozen=True)
class RowTrace:
    """One row of a traced table, where it landed, and the versions that carried it, from
    the table that ingested the file up to the traced table."""

    row: Mapping[str, Any]
    source_file: str | None
    source_line: int | None
    carried_by: tuple[Carrier, ...] = field(default_factory=tuple)


def trace_rows(tables: LakehouseTables, table: str, where: str | Column, *, limit: int = 20) -> list[RowTrace]:
    """The rows of ``table`` matching ``where`` (a SQL predicate, or a Column), at most
    ``limit``, each with its landing file and line and the versions that carried it."""
    df = tables.table(table)
    missing = [c for c in (SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN) if c not in df.columns]
    if missing:
        raise LakehouseError(
            f"Table {table} has no {' or '.join(missing)} column, so its rows cannot be traced to a landing "
            "line. Bronze, silver and quarantine tables keep both (tables written before they did: "
            "`lakehouse reset` them to rebuild); trace a gold table's rows with trace_groups.")
    rows = _matching(df, table, where, limit)
    logs = _Logs(tables)
    chain = _source_chain(logs, table)
    return [RowTrace(row, row.get(SOURCE_FILE_COLUMN), row.get(SOURCE_LINE_COLUMN),
                     _carriers(logs, chain, row.get(SOURCE_FILE_COLUMN))) for row in rows]


@dataclass(frozen=True)
class GroupTrace:
    """One row of a grouped (gold) table, and the source rows of its group, each traced to
    its landing line; each source's carriers end with the table's version that took it in."""

    row: Mapping[str, Any]
    sources: tuple[RowTrace, ...]


def trace_groups(tables: LakehouseTables, table: str, where: str, *, limit: int = 5,
                 sources_per_row: int = 20) -> list[GroupTrace]:
    """The rows of the incrementally kept grouped ``table`` matching ``where`` (at most
    ``limit``), each with the source rows of its group (at most ``sources_per_row``): the
    rows of the table it reads whose group keys, as its commits record the aggregate, equal
    the row's."""
    logs = _Logs(tables)
    spec = _aggregate_of(logs, table)
    source = _streamed_table(logs, table)
    if spec is None or source is None:
        raise LakehouseError(
            f"Table {table} keeps no _source_file and records no incremental aggregate in its commits, so its "
            "rows cannot be traced. Trace the table it reads instead, with the predicate its rows are made by.")
    traced = []
    for row in _matching(tables.table(table), table, where, limit):
        group = [F.expr(sql).eqNullSafe(F.lit(row[name])) for name, sql in spec.keys]
        sources = trace_rows(tables, source, reduce(lambda a, b: a & b, group), limit=sources_per_row)
        taken_in = [Carrier(table, _first_version_reading(logs, table, t.carried_by[-1].version)
                            if t.carried_by[-1].version is not None else None) for t in sources]
        traced.append(GroupTrace(row, tuple(replace(t, carried_by=(*t.carried_by, c))
                                            for t, c in zip(sources, taken_in, strict=True))))
    return traced


def _matching(df: DataFrame, table: str, where: str | Column, limit: int) -> list[dict[str, Any]]:
    try:
        return [r.asDict(recursive=True) for r in df.where(where).limit(limit).collect()]
    except AnalysisException as exc:
        raise LakehouseError(f"Cannot filter {table} by {where!r}: {str(exc).splitlines()[0]}") from exc


def _aggregate_of(logs: _Logs, table: str) -> IncrementalAggregate | None:
    """The aggregate ``table``'s newest batch commit records, if it is kept incrementally."""
    for entry in logs.history(table):
        text = entry.custom_metadata.get(AGGREGATE_KEY)
        if text:
            return IncrementalAggregate.from_metadata(json.loads(str(text)))
    return None


def _source_chain(logs: _Logs, table: str) -> list[str]:
    """``table``, then the table it streams from, and so on down to the one that ingests
    landed files (no streaming table source)."""
    chain = [table]
    while True:
        source = _streamed_table(logs, chain[-1])
        if source is None or source in chain:
            return chain
        chain.append(source)


def _streamed_table(logs: _Logs, table: str) -> str | None:
    """The table whose rows ``table``'s query streams, from its newest batch's offsets."""
    for entry in logs.history(table):
        offsets = recorded_offsets(entry, logs.logged_offsets(table))
        if offsets is None:
            continue
        end = delta_source_end(offsets)
        path = logs.table_paths().get(end.table_id) if end is not None else None
        return logs.name_of(path) if path is not None else None
    return None


def _carriers(logs: _Logs, chain: list[str], source_file: str | None) -> tuple[Carrier, ...]:
    """The versions that carried a row of ``source_file`` up ``chain`` (bronze last)."""
    bronze = chain[-1]
    version = _ingesting_version(logs, bronze, source_file) if source_file else None
    carried = [Carrier(bronze, version)]
    for table in reversed(chain[:-1]):
        version = None if version is None else _first_version_reading(logs, table, version)
        carried.append(Carrier(table, version))
    return tuple(carried)


def _ingesting_version(logs: _Logs, bronze: str, source_file: str) -> int | None:
    """The version of ``bronze`` that committed the batch its query read ``source_file`` in."""
    batch = logs.file_batches(bronze).get(local_file_path(source_file))
    if batch is None:
        return None
    return next((e.version for e in logs.history(bronze) if e.batch_id == batch), None)


def _first_version_reading(logs: _Logs, table: str, source_version: int) -> int | None:
    """The first version of ``table`` whose batch had read ``source_version`` of its source whole."""
    for entry in reversed(logs.history(table)):  # oldest first
        offsets = recorded_offsets(entry, logs.logged_offsets(table))
        end = delta_source_end(offsets) if offsets is not None else None
        source = logs.table_paths().get(end.table_id) if end is not None else None
        read = end.version_read_whole(source) if end is not None and source is not None else None
        if read is not None and read >= source_version:
            return entry.version
    return None


@dataclass
class _Logs:
    """The logs one trace reads, each read once."""

    tables: LakehouseTables
    _histories: dict[str, list[HistoryEntry]] = field(default_factory=dict)
    _file_batches: dict[str, dict[str, int]] = field(default_factory=dict)
    _logged_offsets: dict[str, dict[tuple[str, int], BatchOffsets]] = field(default_factory=dict)
    _table_paths: dict[str, str] | None = None

    def history(self, table: str) -> list[HistoryEntry]:
        """The table's commits, newest first."""
        if table not in self._histories:
            path = str(self.tables.settings.table_path(*table.split(".")))
            store = self.tables.store
            self._histories[table] = store.history(path) if store.exists(path) else []
        return self._histories[table]

    def logged_offsets(self, table: str) -> dict[tuple[str, int], BatchOffsets]:
        """The source offsets the event log holds for the table's batches."""
        if table not in self._logged_offsets:
            self._logged_offsets[table] = logged_offsets(event_log_path(self.tables.settings.root), table)
        return self._logged_offsets[table]

    def file_batches(self, bronze: str) -> dict[str, int]:
        """The batch ``bronze``'s query read each landed file (local path) in."""
        if bronze not in self._file_batches:
            checkpoint = Checkpoint(str(self.tables.settings.checkpoint_path(*bronze.split("."))))
            self._file_batches[bronze] = {local_file_path(e.path): e.batch_id for e in checkpoint.file_source_log()}
        return self._file_batches[bronze]

    def table_paths(self) -> dict[str, str]:
        """The lakehouse's tables by Delta table id (what a stream's offsets name them by)."""
        if self._table_paths is None:
            self._table_paths = tables_by_id(self.tables.settings.root, self.tables.store.table_id)
        return self._table_paths

    def name_of(self, path: str) -> str | None:
        """The table at ``path`` (as :meth:`table_paths` gives it: below the root, on a disk or
        a store) by name, if it is under the lakehouse's root."""
        root = str(self.tables.settings.root).rstrip("/") + "/"
        if not path.startswith(root):
            return None
        parts = path[len(root):].strip("/").split("/")
        if len(parts) < 2:
            return None
        layer, name = parts[-2:]
        return f"{SYSTEM_LAYER if layer == SYSTEM_DIR else layer}.{name}"


def group_json(trace: GroupTrace) -> dict[str, Any]:
    """A gold row's trace as ``--json`` prints it."""
    return {"row": json.loads(json.dumps(dict(trace.row), default=str)),
            "sources": [trace_json(t) for t in trace.sources]}


def trace_json(trace: RowTrace) -> dict[str, Any]:
    """A trace as ``--json`` prints it."""
    return {"row": json.loads(json.dumps(dict(trace.row), default=str)), "source_file": trace.source_file,
            "source_line": trace.source_line,
            "carried_by": [{"table": c.table, "version": c.version} for c in trace.carried_by]}
