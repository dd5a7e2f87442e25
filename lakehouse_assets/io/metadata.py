"""What every materialization of a table reports about the table itself, read from the
table (its log and schema), never from what the run remembers: version, rows, columns
(described as the asset declares them), column lineage (declared, held to the tables'
columns: :mod:`lakehouse_assets.io.lineage`). What the run did is its commits' report
(:mod:`lakehouse_assets.io.run_report`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from lakehouse_assets.io.lineage import kept_lineage
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.storage import DeltaTableStore

#: The metadata entry Dagster's UI reads a table's column lineage from.
LINEAGE = "dagster/column_lineage"


def table_metadata(store: DeltaTableStore, run: TableRun, written_version: int | None,
                   lineage: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> dict[str, Any]:
    """The table's path, current version, the version this run wrote last, its row count
    (from the log's statistics), its columns with their descriptions, and its column
    ``lineage`` (:mod:`lakehouse_assets.io.lineage`) held to the tables' columns."""
    path = str(run.table.path)
    metadata: dict[str, Any] = {"table_path": dg.MetadataValue.path(path)}
    if not store.exists(path):
        return metadata
    snapshot = store.snapshot(path)
    metadata["delta_version"] = dg.MetadataValue.int(snapshot.version)
    metadata["written_version"] = (
        dg.MetadataValue.int(written_version) if written_version is not None
        else dg.MetadataValue.text("none (nothing new)"))
    rows = snapshot.row_count()
    if rows is not None:
        metadata["dagster/row_count"] = dg.MetadataValue.int(rows)
    fields = snapshot.schema().fields
    metadata["dagster/column_schema"] = dg.TableSchema(columns=[
        dg.TableColumn(f.name, f.dataType.simpleString(), description=run.spec.column_description(f.name))
        for f in fields])
    kept = kept_lineage(lineage, [f.name for f in fields], store, run.root) if lineage else {}
    if kept:
        metadata[LINEAGE] = dg.TableColumnLineage(deps_by_column={
            column: [dg.TableColumnDep(asset_key=dg.AssetKey(table.split(".")), column_name=source_column)
                     for table, source_column in sources]
            for column, sources in kept.items()
        })
    return metadata
