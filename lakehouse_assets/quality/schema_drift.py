"""The schema drift check: WARN when a table's columns changed since the version the previous
check saw."""

from collections.abc import Mapping
from typing import Any

import dagster as dg
from pyspark.sql import types as T

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.quality.check_history import DELTA_TABLE_ID, DELTA_VERSION, last_evaluation, plain_metadata
from lakehouse_assets.storage import DeltaTableStore

SCHEMA_DRIFT_CHECK = "schema_drift"


def schema_drift_result(
    context: dg.AssetCheckExecutionContext, key: dg.AssetKey, store: DeltaTableStore, path: str, version: int,
    identity: str,
) -> dg.AssetCheckResult:
    """WARN when the table's columns at ``version`` differ from those at the version the
    previous drift check saw (or, the first time, the version before)."""
    previous = last_evaluation(context, dg.AssetCheckKey(key, SCHEMA_DRIFT_CHECK))
    base = None
    if previous is not None:
        metadata = plain_metadata(previous.metadata)
        seen = metadata.get(DELTA_VERSION)
        if metadata.get(DELTA_TABLE_ID) == identity and isinstance(seen, int) and seen <= version:
            base = seen
    if base is None and version > 0:
        base = version - 1
    metadata = {DELTA_VERSION: dg.MetadataValue.int(version), DELTA_TABLE_ID: identity}
    current = store.snapshot(path, version=version).schema()
    metadata["dagster/column_schema"] = dg.TableSchema(
        columns=[dg.TableColumn(f.name, f.dataType.simpleString()) for f in current.fields]
    )
    if base is None:
        return _drift(key, True, metadata, "The table's first version: nothing to compare with yet")
    metadata["compared_with_version"] = dg.MetadataValue.int(base)
    try:
        before = store.snapshot(path, version=base).schema()
    except LakehouseError as exc:
        return _drift(key, True, metadata, f"Version {base} can no longer be read, so it was not compared ({exc})")
    added, removed, changed = schema_changes(before, current)
    metadata["columns_added"] = ", ".join(added)
    metadata["columns_removed"] = ", ".join(removed)
    metadata["columns_changed"] = ", ".join(changed)
    metadata["columns_changed_count"] = dg.MetadataValue.int(len(added) + len(removed) + len(changed))
    if not (added or removed or changed):
        return _drift(key, True, metadata, f"Same columns as version {base}")
    parts = [f"{label}: {', '.join(items)}" for label, items in
             (("added", added), ("removed", removed), ("changed", changed)) if items]
    return _drift(key, False, metadata,
                  f"Columns changed since version {base}: {'; '.join(parts)}. Update downstream "
                  "queries and the table's contract if the change is intended.")


def schema_changes(before: T.StructType, after: T.StructType) -> tuple[list[str], list[str], list[str]]:
    """Columns added, removed, and changed in type (``"mrn: int -> bigint"``), by
    case-insensitive name, as Delta compares column names."""
    old = {f.name.lower(): f for f in before.fields}
    new = {f.name.lower(): f for f in after.fields}
    added = [new[n].name for n in new if n not in old]
    removed = [old[n].name for n in old if n not in new]
    changed = [
        f"{new[n].name}: {old[n].dataType.simpleString()} -> {new[n].dataType.simpleString()}"
        for n in new
        if n in old and old[n].dataType.simpleString() != new[n].dataType.simpleString()
    ]
    return added, removed, changed


# -- results --------------------------------------------------------------------------------


def _drift(key: dg.AssetKey, passed: bool, metadata: Mapping[str, Any], description: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        asset_key=key, check_name=SCHEMA_DRIFT_CHECK, passed=passed,
        severity=dg.AssetCheckSeverity.WARN, metadata=dict(metadata), description=description,
    )
