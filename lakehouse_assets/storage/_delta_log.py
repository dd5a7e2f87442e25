"""Reading a Delta log version by version, for the streaming source.

delta-rs answers "what is the table at version N"; a stream needs "what did version N
add", which is the commit file ``_delta_log/<N>.json`` itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from lakehouse_assets.storage._files import Location, locate, table_file_path

#: The folder of a table that holds its Delta log: a folder with one is a Delta table.
DELTA_LOG = "_delta_log"


@dataclass(frozen=True)
class DataFile:
    """A data file a version added."""

    path: str  # absolute
    size: int
    partition_values: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Commit:
    """What one version of the table did, as far as a stream reader cares."""

    version: int
    added: list[DataFile]
    removes_data: bool
    schema_string: str | None
    operation: str
    removed: list[DataFile] = field(default_factory=list)  # data files removed with dataChange
    changes: list[DataFile] = field(default_factory=list)  # change data feed files (cdc actions)
    timestamp_ms: int = 0


def commit_file(table: Location, version: int) -> Location:
    return table.child(DELTA_LOG, f"{version:020d}.json")


def read_commit(table_path: str, version: int) -> Commit:
    """The actions of ``version``, from its commit file."""
    table = locate(table_path)
    text = commit_file(table, version).read_text()
    added: list[DataFile] = []
    removed: list[DataFile] = []
    changes: list[DataFile] = []
    schema_string = None
    operation = "UNKNOWN"
    timestamp_ms = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        action: dict[str, Any] = json.loads(line)
        if "add" in action:
            add = action["add"]
            if add.get("dataChange", True):
                added.append(DataFile(table_file_path(table_path, add["path"]), int(add.get("size", 0)),
                                      add.get("partitionValues") or {}))
        elif "remove" in action:
            remove = action["remove"]
            if remove.get("dataChange", True):
                removed.append(DataFile(table_file_path(table_path, remove["path"]), int(remove.get("size") or 0),
                                        remove.get("partitionValues") or {}))
        elif "cdc" in action:
            cdc = action["cdc"]
            changes.append(DataFile(table_file_path(table_path, cdc["path"]), int(cdc.get("size", 0)),
                                    cdc.get("partitionValues") or {}))
        elif "metaData" in action:
            schema_string = action["metaData"].get("schemaString")
        elif "commitInfo" in action:
            info = action["commitInfo"]
            operation = _recorded_operation(info) or info.get("operation", operation)
            timestamp_ms = int(info.get("timestamp") or 0)
    return Commit(version, added, bool(removed), schema_string, operation, removed, changes, timestamp_ms)


def snapshot_files(table_path: str, version: int) -> list[DataFile]:
    """The data files of the table at ``version``, oldest first (a stable order)."""
    table = DeltaTable(table_path, version=version)
    actions = pa.table(table.get_add_actions(flatten=True))
    names = actions.column_names
    partition_columns = [n for n in names if n.startswith("partition.")]
    rows = actions.to_pylist()
    rows.sort(key=lambda r: (r["modification_time"], str(r["path"])))
    return [
        DataFile(
            table_file_path(table_path, str(r["path"])),
            int(r["size_bytes"]),
            {c[len("partition."):]: (None if r[c] is None else str(r[c])) for c in partition_columns},
        )
        for r in rows
    ]


def _recorded_operation(info: dict[str, Any]) -> str | None:
    """The operation the project named a commit by: in its ``userMetadata`` (Delta's
    connector) or its commitInfo (delta-rs commits)."""
    try:
        recorded = json.loads(str(info["userMetadata"])) if info.get("userMetadata") else {}
    except ValueError:
        recorded = {}
    return recorded.get("lakehouse.operation") or info.get("lakehouse.operation")
