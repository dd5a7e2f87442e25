"""What the Dagster instance remembers of a check's earlier evaluations: the Delta version and
table it saw, which the next evaluation starts from."""

from collections.abc import Mapping
from typing import Any

import dagster as dg

#: The table's version, and its Delta table id, an evaluation saw.
DELTA_VERSION = "delta_version"
DELTA_TABLE_ID = "delta_table_id"

# How many past executions of a check to look through for its last completed evaluation
# (runs that planned the check but never ran it leave records without one).
_HISTORY_LIMIT = 25


def last_evaluation(
    context: dg.AssetCheckExecutionContext, check_key: dg.AssetCheckKey
) -> dg.AssetCheckEvaluation | None:
    """The latest completed evaluation of ``check_key`` in an earlier run, or None."""
    records = context.instance.event_log_storage.get_asset_check_execution_history(check_key, limit=_HISTORY_LIMIT)
    for record in records:
        if record.run_id == context.run.run_id or record.event is None or record.event.dagster_event is None:
            continue
        data = record.event.dagster_event.event_specific_data
        if isinstance(data, dg.AssetCheckEvaluation):
            return data
    return None


def plain_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata values as plain Python values (``IntMetadataValue(5)`` -> ``5``)."""
    return {k: getattr(v, "value", v) for k, v in metadata.items()}
