"""The ``declared_schema`` check: a table's stored columns have the types its declaration gives.

A table declares its columns once (a SQL column list, ``columns=`` of a Python table, a
contract's model); every declared column with a type is part of its contract. The check reads
the table's schema from its Delta log alone (no Spark), so it costs nothing per run. Columns
the table has beyond those declared are allowed: a declaration may describe only some.
"""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from lakehouse_assets.tables.sql_types import spark_type

DECLARED_SCHEMA_CHECK = "declared_schema"

def declared_schema_check(table: str, types: Mapping[str, str], *, blocking: bool) -> dg.AssetChecksDefinition:
    """The ``declared_schema`` check of ``table`` (``layer.name``): each column of ``types``
    (name to declared Spark SQL type) is stored with that type."""
    layer, name = table.split(".")
    wanted = {column: spark_type(declared).simpleString() for column, declared in types.items()}

    @dg.asset_check(asset=dg.AssetKey([layer, name]), name=DECLARED_SCHEMA_CHECK, blocking=blocking,
                    required_resource_keys={"lakehouse"},
                    description=f"{table} stores its {len(wanted)} declared columns with their declared types")
    def declared_schema(context) -> dg.AssetCheckResult:  # type: ignore[no-untyped-def]  # Dagster refuses a string annotation
        path = context.resources.lakehouse.settings().table_path(layer, name)
        store = context.resources.lakehouse.store()
        if not store.exists(str(path)):
            return dg.AssetCheckResult(passed=False, description=f"No table {table} at {path} to check: "
                                       "materialize it first.")
        stored = {field.name: field.dataType.simpleString() for field in store.schema(str(path)).fields}
        wrong = {column: f"declared {declared}, stored {stored[column]}" if column in stored
                 else f"declared {declared}, not in the table"
                 for column, declared in wanted.items() if stored.get(column) != declared}
        return dg.AssetCheckResult(
            passed=not wrong,
            description="Every declared column is stored with its declared type" if not wrong else
            f"{len(wrong)} declared columns of {table} are not stored as declared: "
            + "; ".join(f"{c} ({w})" for c, w in wrong.items()),
            metadata={"columns_checked": len(wanted), "mismatched": dg.MetadataValue.json(wrong)})

    return declared_schema
