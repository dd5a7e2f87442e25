"""The one record of what a batch did: the Delta commit that writes its rows.

Every commit the lakehouse makes carries, in Delta's ``userMetadata`` (a JSON object of
``lakehouse.*`` keys), who made it (operation, run, query and batch), what the run read
(:class:`Reading`) and what the batch's rows did (keys under :data:`BATCH_METADATA_PREFIX`).
Delta records the rest (version, time, rows written). Dagster's metadata, the event log,
freshness, trace, verify and ``lakehouse status`` read it back from the table's history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Commit metadata keys. The operation, and for a streaming batch its query and batch id.
OPERATION_KEY = "lakehouse.operation"
QUERY_KEY = "lakehouse.query"
BATCH_KEY = "lakehouse.batchId"
#: The run whose query (or batch write) made the commit: a Dagster run's id.
RUN_KEY = "lakehouse.runId"
#: What the run read before it started (:class:`Reading`, as JSON).
READING_KEY = "lakehouse.reading"
#: The output mode of the query that made the commit.
OUTPUT_MODE_KEY = "lakehouse.outputMode"
#: Set on the commits of a query that reads landed files (one row per landed record).
READS_FILES_KEY = "lakehouse.readsFiles"
#: Commit metadata of a merge: the key columns it matched rows on (a JSON list).
MERGE_KEYS_KEY = "lakehouse.mergeKeys"
#: Keys that describe a batch's rows start with this: only the commit that writes the rows
#: records them, never a schema change made for them, so summing a run's commits counts each
#: batch once.
BATCH_METADATA_PREFIX = "lakehouse.batch."
#: When the batch's function started (ISO 8601, UTC): its commit's time says when it ended.
STARTED_KEY = f"{BATCH_METADATA_PREFIX}startedAt"
#: The batch's rows, failing rows per rule, and of those the rows written to the table (a
#: dropping rule's go to its quarantine), as JSON (``{"rows": n, "failed": {rule: n}, "kept": {rule: n}}``).
EXPECTATIONS_KEY = f"{BATCH_METADATA_PREFIX}expectations"


@dataclass(frozen=True)
class TableVersion:
    """One table as a run found it: its Delta table id (a table dropped and created again has
    a new one) and its version."""

    table_id: str
    version: int


@dataclass(frozen=True)
class Reading:
    """What a run read, found before its query started: the ``tables`` it reads (by
    ``layer.name``) at their versions, and, for a table loaded in batch from landed files,
    the files each landing folder held (``landed``, by source: each file's path below the
    folder, size and modification time, as :func:`landed_file_line` writes them).

    A query run with ``availableNow`` reads everything its sources held when it started, so
    once its run has completed, the table has read its sources at least this far: a run that
    finds them as the newest commit records has nothing new to read."""

    tables: Mapping[str, TableVersion] = field(default_factory=dict)
    landed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> str:
        """The reading as a commit records it."""
        return json.dumps({
            "tables": {name: {"table_id": v.table_id, "version": v.version} for name, v in sorted(self.tables.items())},
            "landed": {source: list(files) for source, files in sorted(self.landed.items())},
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Reading:
        data = json.loads(text)
        return cls({name: TableVersion(str(v["table_id"]), int(v["version"]))
                    for name, v in (data.get("tables") or {}).items()},
                   {str(k): tuple(str(f) for f in v) for k, v in (data.get("landed") or {}).items()})

    def metadata(self) -> dict[str, Any]:
        """The reading as plain data, for a materialization's metadata (the UI shows what each run read)."""
        plain: dict[str, Any] = json.loads(self.to_json())
        return plain


def landed_file_line(relative_path: str, size: int, modified: str) -> str:
    """One landed file as a :class:`Reading` lists it: its path below its folder, size and
    modification time (ISO 8601), tab-separated."""
    return f"{relative_path}\t{size}\t{modified}"


def parse_metadata(text: str | None) -> dict[str, Any]:
    """A commit's ``userMetadata``: the lakehouse's keys, or nothing for another writer's free text."""
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return {k: v for k, v in data.items() if str(k).startswith("lakehouse.")} if isinstance(data, dict) else {}


def user_metadata(custom: Mapping[str, Any]) -> str:
    """The ``userMetadata`` text a commit records ``custom`` in."""
    return json.dumps(dict(custom), separators=(",", ":"), default=str)


__all__ = [
    "BATCH_KEY", "BATCH_METADATA_PREFIX", "EXPECTATIONS_KEY", "MERGE_KEYS_KEY", "OPERATION_KEY", "OUTPUT_MODE_KEY",
    "QUERY_KEY",
    "READING_KEY", "READS_FILES_KEY", "RUN_KEY", "STARTED_KEY", "Reading", "TableVersion", "landed_file_line",
    "parse_metadata",
    "user_metadata",
]
