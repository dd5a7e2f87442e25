"""What a commit records beside its files: who wrote it (custom metadata: operation, query,
batch, rows), the batch's app transaction, and the column additions made for it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import deltalake
from deltalake import CommitProperties, DeltaTable, Transaction
from pyspark.sql import types as T

from lakehouse_assets.storage._schema import spark_to_arrow
from lakehouse_assets.storage.engine import BATCH_METADATA_PREFIX, AppTransaction

# Custom commitInfo keys: who wrote a version, so history can say which query and batch.
META_OPERATION = "lakehouse.operation"
META_QUERY = "lakehouse.query"
META_BATCH = "lakehouse.batchId"
META_ROWS = "lakehouse.rowsWritten"


def listed_files(table: DeltaTable) -> list[dict[str, Any]]:
    """The table's add actions (path, size_bytes, ...) as plain rows."""
    import pyarrow as pa

    return list(pa.table(table.get_add_actions(flatten=True)).select(["path", "size_bytes"]).to_pylist())


def add_columns(
    table: DeltaTable, table_schema: T.StructType, names: Sequence[str], properties: CommitProperties
) -> None:
    """Add the nullable columns ``names`` (typed as in ``table_schema``) to the table.

    delta-rs changes a table's schema in a write only when it overwrites: an append with new
    columns would commit their files while the log keeps the old schema, and the columns
    would never be read. So the columns are added in a commit of their own just before the
    append. Files written earlier read the new columns as null; if the append then fails,
    the table only has the (empty) columns, and the retry appends into them.
    """
    wanted = {n.lower() for n in names}
    added = T.StructType([f for f in table_schema.fields if f.name.lower() in wanted])
    fields = deltalake.Schema.from_arrow(spark_to_arrow(added)).fields
    batch_keys = (META_ROWS, META_BATCH, META_QUERY)
    custom = {k: v for k, v in (properties.custom_metadata or {}).items()
              if k not in batch_keys and not str(k).startswith(BATCH_METADATA_PREFIX)}
    custom[META_OPERATION] = "ADD COLUMNS"
    table.alter.add_columns(fields, commit_properties=CommitProperties(custom_metadata=custom))


def already_committed(table: DeltaTable, transaction: AppTransaction | None) -> bool:
    if transaction is None:
        return False
    committed = table.transaction_version(transaction.app_id)
    return committed is not None and committed >= transaction.batch_id


def commit_properties(
    operation: str, transaction: AppTransaction | None, rows: int | None, metadata: Mapping[str, Any] | None
) -> CommitProperties:
    custom: dict[str, Any] = {META_OPERATION: operation}
    if rows is not None:
        custom[META_ROWS] = rows
    if transaction is not None:
        custom[META_QUERY] = transaction.app_id
        custom[META_BATCH] = transaction.batch_id
    custom.update(metadata or {})
    return CommitProperties(
        custom_metadata=custom,
        app_transactions=(
            [Transaction(app_id=transaction.app_id, version=transaction.batch_id)] if transaction else None),
    )


def with_properties(table: DeltaTable, properties: Mapping[str, str] | None) -> DeltaTable:
    """The table with ``properties`` set, in a commit of their own when it lacks any (as
    ``ALTER TABLE ... SET TBLPROPERTIES``: delta-rs raises the protocol a property needs)."""
    if not properties:
        return table
    current = table.metadata().configuration
    missing = {k: v for k, v in properties.items() if str(current.get(k)).lower() != str(v).lower()}
    if missing:
        table.alter.set_table_properties(missing)
        table.update_incremental()
    return table
