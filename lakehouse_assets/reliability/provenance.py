"""Where a row came from: its landing file and line, and the table versions that carried it
(``lakehouse trace``; docs/operations.md says how each version is found). Nothing about the
graph is declared twice: a table's source is the table its commits record their run reading.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any

import pyarrow.compute as pc
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.reliability.flows import project_flows
from lakehouse_assets.storage import HistoryEntry
from lakehouse_assets.tables.lakehouse_tables import LakehouseTables
from lakehouse_assets.tables.sql_aggregate import group_keys


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
                     _carriers(logs, chain, row.get(SOURCE_FILE_COLUMN), row.get(SOURCE_LINE_COLUMN))) for row in rows]


@dataclass(frozen=True)
class GroupTrace:
    """One row of a grouped (gold) table, and the source rows of its group, each traced to
    its landing line; each source's carriers end with the table's version that took it in."""

    row: Mapping[str, Any]
    sources: tuple[RowTrace, ...]


def trace_groups(tables: LakehouseTables, table: str, where: str, *, limit: int = 5,
                 sources_per_row: int = 20) -> list[GroupTrace]:
    """The rows of the grouped ``table`` matching ``where`` (at most ``limit``), each with the
    source rows of its group (at most ``sources_per_row``): the rows of the table it reads
    whose values of the expressions its declared query groups by equal the row's."""
    logs = _Logs(tables)
    query = next((r.query for r in project_flows(tables.settings).recomputations if r.table == table), None)
    source = _streamed_table(logs, table)
    if query is None or source is None:
        raise LakehouseError(
            f"Table {table} keeps no _source_file and is no grouped streaming table with commits, so its rows "
            "cannot be traced. Trace the table it reads instead, with the predicate its rows are made by.")
    traced = []
    for row in _matching(tables.table(table), table, where, limit):
        group = [F.expr(sql).eqNullSafe(F.lit(row[name])) for name, sql in group_keys(query)]
        sources = trace_rows(tables, source, reduce(lambda a, b: a & b, group), limit=sources_per_row)
        taken_in = [Carrier(table, _first_version_reading(logs, table, source, t.carried_by[-1].version)
                            if t.carried_by[-1].version is not None else None) for t in sources]
        traced.append(GroupTrace(row, tuple(replace(t, carried_by=(*t.carried_by, c))
                                            for t, c in zip(sources, taken_in, strict=True))))
    return traced


def _matching(df: DataFrame, table: str, where: str | Column, limit: int) -> list[dict[str, Any]]:
    try:
        return [r.asDict(recursive=True) for r in df.where(where).limit(limit).collect()]
    except AnalysisException as exc:
        raise LakehouseError(f"Cannot filter {table} by {where!r}: {str(exc).splitlines()[0]}") from exc


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
    """The table ``table``'s query reads, as its newest commit records its run reading it."""
    for entry in logs.history(table):
        if entry.reading is not None:
            return next(iter(sorted(entry.reading.tables)), None)
    return None


def _carriers(logs: _Logs, chain: list[str], source_file: str | None, source_line: int | None) -> tuple[Carrier, ...]:
    """The versions that carried a row of ``source_file`` (line ``source_line``) up ``chain``
    (bronze last): each table's first version holding it."""
    return tuple(Carrier(table, _first_version_holding(logs, table, source_file, source_line)
                         if source_file else None) for table in reversed(chain))


def _first_version_holding(logs: _Logs, table: str, source_file: str, source_line: int | None) -> int | None:
    """The first version of ``table`` that holds a row of ``source_file`` at ``source_line``
    (None: none does, or the versions that would tell can no longer be read)."""
    holds = _holds(logs, table, source_file, source_line)
    latest = logs.version(table)
    if latest is None or not holds(latest):
        return None
    low, high = 0, latest  # holds(high) is known; find the first version that holds it
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _holds(logs: _Logs, table: str, source_file: str, source_line: int | None) -> Callable[[int], bool]:
    path = str(logs.tables.settings.table_path(*table.split(".")))
    where = pc.field(SOURCE_FILE_COLUMN) == source_file
    if source_line is not None:
        where = where & (pc.field(SOURCE_LINE_COLUMN) == source_line)

    def holds(version: int) -> bool:
        try:
            snapshot = logs.tables.store.snapshot(path, version=version)
        except LakehouseError:
            return False  # a version cleaned away holds nothing anyone can read
        if SOURCE_FILE_COLUMN not in snapshot.column_names():
            return False
        return bool(snapshot.to_arrow([SOURCE_FILE_COLUMN], where=where, limit=1).num_rows > 0)

    return holds


def _first_version_reading(logs: _Logs, table: str, source: str, source_version: int) -> int | None:
    """The first version of ``table`` whose run had read ``source_version`` of ``source``."""
    for entry in reversed(logs.history(table)):  # oldest first
        read = entry.reading.tables.get(source) if entry.reading is not None else None
        if read is not None and read.version >= source_version:
            return entry.version
    return None


@dataclass
class _Logs:
    """The histories one trace reads, each read once."""

    tables: LakehouseTables
    _histories: dict[str, list[HistoryEntry]] = field(default_factory=dict)

    def history(self, table: str) -> list[HistoryEntry]:
        """The table's commits, newest first."""
        if table not in self._histories:
            path = str(self.tables.settings.table_path(*table.split(".")))
            store = self.tables.store
            self._histories[table] = store.history(path) if store.exists(path) else []
        return self._histories[table]

    def version(self, table: str) -> int | None:
        """The table's latest version, or None when there is no table."""
        history = self.history(table)
        return history[0].version if history else None


def group_json(trace: GroupTrace) -> dict[str, Any]:
    """A gold row's trace as ``--json`` prints it."""
    return {"row": json.loads(json.dumps(dict(trace.row), default=str)),
            "sources": [trace_json(t) for t in trace.sources]}


def trace_json(trace: RowTrace) -> dict[str, Any]:
    """A trace as ``--json`` prints it."""
    return {"row": json.loads(json.dumps(dict(trace.row), default=str)), "source_file": trace.source_file,
            "source_line": trace.source_line,
            "carried_by": [{"table": c.table, "version": c.version} for c in trace.carried_by]}
