"""The column lineage a table's materialization reports (``dagster/column_lineage``).

Derived, never written by hand: a SQL asset's lineage is read from its SQL when it is
declared (:mod:`lakehouse_assets.tables.sql_lineage`; for a grouped table kept incrementally the
DataFrame is the batch's source rows, not the table, so the SQL is the one that tells), and any
other asset's from the plan of the DataFrame it returned
(:mod:`lakehouse_assets.tables.plan_lineage`), once its query has written. What is reported is then
held to the tables as they are: a column the written table lacks is not reported, nor a source
column the upstream table lacks (a change data feed's ``_change_type``, say).

An asset that returns no DataFrame (an ingestion from landed files, snapshots of files) reads
no table, so it reports no lineage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lakehouse_assets.cdc import END_AT, START_AT
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.location import Location
from lakehouse_assets.outputs import ExpectedRows, RoutedRows
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.tables.plan_lineage import Lineage, plan_lineage


def derived_lineage(obj: Any, run: TableRun, log: Any = None) -> Lineage | None:
    """The lineage of the table ``run`` writes from what its asset returned (``obj``): the
    declared one (read from its SQL), else the one its DataFrame's plan gives; None when
    there is neither. Never fails the run: a plan that cannot be read is logged and skipped."""
    if run.spec.column_lineage:
        return {column: [(source.table, source.column) for source in sources]
                for column, sources in run.spec.column_lineage.items()}
    if isinstance(obj, RoutedRows):
        rows = obj.rows.select(*obj.passed_columns)
    elif isinstance(obj, ExpectedRows):
        rows = obj.rows
    else:
        return None
    try:
        lineage = plan_lineage(rows, str(run.root))
    except Exception as exc:  # noqa: BLE001 - lineage is reported, not required: the write goes on
        if log is not None:
            log.warning(f"Column lineage of {run.table.table_name} not derived: {exc}")
        return None
    cdc = run.spec.auto_cdc
    if cdc is not None and cdc.stored_as_scd_type == 2 and cdc.sequence_by in lineage:
        # A version opens and closes at the sequence of the changes that made it.
        lineage[START_AT] = lineage[END_AT] = list(lineage[cdc.sequence_by])
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
