"""The column lineage a table's materialization reports (``dagster/column_lineage``).

Declared, never derived from a query plan's text: a SQL asset's lineage is read from its SQL
by sqlglot when it is declared (:mod:`lakehouse_assets.tables.sql_lineage`), and a Python
asset declares its own (``table_asset(column_lineage=...)``); a table that declares none
reports none. What is reported is held to the tables as they are: a column the written table
lacks is not reported, nor a source column the upstream table lacks (a change data feed's
``_change_type``, say).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from lakehouse_assets.cdc import END_AT, START_AT
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.location import Location
from lakehouse_assets.storage import DeltaTableStore

#: Each column of a table with the upstream ``(table, column)`` pairs it is computed from.
Lineage = dict[str, list[tuple[str, str]]]


def declared_lineage(run: TableRun) -> Lineage | None:
    """The lineage the table ``run`` writes declares; None when it declares none. A version of
    an SCD type 2 table opens and closes at the sequence of the changes that made it."""
    if not run.spec.column_lineage:
        return None
    lineage = {column: [(source.table, source.column) for source in sources]
               for column, sources in run.spec.column_lineage.items()}
    cdc = run.spec.auto_cdc
    if cdc is not None and cdc.stored_as_scd_type == 2:
        changes = sorted({table for sources in lineage.values() for table, _ in sources})
        lineage[START_AT] = lineage[END_AT] = [(table, cdc.sequence_by) for table in changes]
    return lineage


def kept_lineage(lineage: Mapping[str, Sequence[tuple[str, str]]], table_columns: Iterable[str],
                 store: DeltaTableStore, root: Location) -> Lineage:
    """``lineage`` held to the written table's columns and to the columns each upstream
    table under ``root`` has (as ``store`` reads its schema; a table it cannot read is trusted)."""

    def upstream_columns(table: str) -> set[str] | None:
        layer, name = table.split(".", 1)
        path = str(root / layer / name)
        return set(store.snapshot(path).schema().names) if store.exists(path) else None

    written = {c.lower() for c in table_columns}
    known: dict[str, set[str] | None] = {}
    kept: Lineage = {}
    for column, sources in lineage.items():
        if column.lower() not in written:
            continue
        found = []
        for table, source in sources:
            if table not in known:
                columns = upstream_columns(table)
                known[table] = None if columns is None else {c.lower() for c in columns}
            upstream = known[table]
            if upstream is None or source.lower() in upstream:
                found.append((table, source))
        if found:
            kept[column] = found
    return kept
