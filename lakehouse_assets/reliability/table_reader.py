"""A Delta table read straight from its folder: log files, data files, rows.

The invariant checker reads tables this way (the log's commit files parsed here, rows and
file lists through the store's Spark-free snapshot; no Spark, none of the write path), so a
bug in the code that writes the tables cannot also hide itself from the check. A table is a
:class:`~lakehouse_assets.location.Location` (a folder on a local disk or a prefix on an
object store): each file is read through its file system, and delta-rs opens the table on
the store its location names.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_assets.location import Location
from lakehouse_assets.storage import DELTA_LOG, DeltaRsSnapshot, SnapshotFile
from lakehouse_assets.storage.delta_rs_snapshot import open_delta_table

_COMMIT_FILE = re.compile(r"(\d{20})\.json")
_CHECKPOINT_FILE = re.compile(r"(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet")
# Commit files read at once from an object store, where each is a request's round trip.
_STORE_READERS = 16


@dataclass
class LogVersion:
    """One commit file of a table's log, parsed."""

    version: int
    path: Location
    actions: list[dict[str, Any]] = field(default_factory=list)
    #: Why the file is not a whole commit (unreadable, empty, a line that is not JSON).
    problem: str | None = None

    def transactions(self) -> list[tuple[str, int]]:
        """The ``(appId, version)`` of the streaming batches this commit records."""
        return [(a["txn"]["appId"], int(a["txn"]["version"])) for a in self.actions if "txn" in a]

    def recorded(self) -> dict[str, Any]:
        """What the project recorded in the commit: the ``lakehouse.*`` keys of its
        ``userMetadata`` (Delta's connector), or of its commitInfo (delta-rs commits)."""
        info: dict[str, Any] = next((a["commitInfo"] for a in self.actions if "commitInfo" in a), {})
        recorded = {k: v for k, v in info.items() if str(k).startswith("lakehouse.")}
        try:
            recorded.update(json.loads(str(info["userMetadata"])) if info.get("userMetadata") else {})
        except ValueError:
            pass  # another writer's free text
        return recorded


def log_versions(table: Location) -> list[LogVersion]:
    """Every commit file in the table's log, oldest first, each parsed line by line."""
    log = table / DELTA_LOG
    matches = [m for name in log.names() if (m := _COMMIT_FILE.fullmatch(name))]
    versions, files = [int(m.group(1)) for m in matches], [log / m.group(0) for m in matches]
    if table.is_local or len(files) < 2:
        return list(map(_parse_commit, versions, files))
    with ThreadPoolExecutor(min(_STORE_READERS, len(files))) as pool:
        return list(pool.map(_parse_commit, versions, files))


def checkpoint_versions(table: Location) -> list[int]:
    """The versions the log has Delta checkpoints (Parquet snapshots) for."""
    return sorted({int(m.group(1)) for name in (table / DELTA_LOG).names()
                   if (m := _CHECKPOINT_FILE.fullmatch(name))})


def app_versions(table: Location) -> dict[str, int]:
    """Each app transaction's latest version (a streaming query's last batch), as the log
    states it: the newest Delta checkpoint's ``txn`` entries, then the commits after it. It
    holds when the older commit files have been cleaned away."""
    checkpoints = checkpoint_versions(table)
    latest: dict[str, int] = {}
    start = -1
    if checkpoints:
        start = checkpoints[-1]
        log = table / DELTA_LOG
        for name in fnmatch.filter(log.names(), f"{start:020d}.checkpoint*.parquet"):
            part = log / name
            for txn in pq.read_table(part.path, filesystem=part.fs, columns=["txn"]).column("txn").to_pylist():
                if txn:
                    latest[txn["appId"]] = max(latest.get(txn["appId"], -1), int(txn["version"]))
    for commit in log_versions(table):
        if commit.version > start:
            for app, version in commit.transactions():
                latest[app] = max(latest.get(app, -1), version)
    return latest


def _parse_commit(version: int, file: Location) -> LogVersion:
    commit = LogVersion(version, file)
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        commit.problem = f"cannot be read ({exc})"
        return commit
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError as exc:
            commit.problem = f"line {number} is not JSON ({exc.args[0]}): {line[:80]!r}"
            return commit
        if not isinstance(action, dict) or len(action) != 1:
            commit.problem = f"line {number} is not a single Delta action: {line[:80]!r}"
            return commit
        commit.actions.append(action)
    if not commit.actions:
        commit.problem = "holds no action (an empty commit file)"
    return commit


def snapshot_files(table: Location) -> list[SnapshotFile]:
    """The data files of the latest snapshot with the size and row count the log states."""
    return _snapshot(table).files()


def parquet_rows(file: Location) -> int:
    """The row count in a Parquet file's footer."""
    return int(pq.read_metadata(file.path, filesystem=file.fs).num_rows)


def read_rows(table: Location, columns: Sequence[str] | None = None) -> pa.Table:
    """The latest snapshot's rows (all columns, or ``columns`` that exist)."""
    snapshot = _snapshot(table)
    if columns is not None:
        present = set(snapshot.column_names())
        columns = [c for c in columns if c in present]
    return snapshot.to_arrow(columns)


def row_tuples(table: pa.Table, columns: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """Each row's values of ``columns`` (None for a column the table lacks), hashable and
    comparable: NaN equals NaN, lists become tuples."""
    present = [c for c in columns if c in table.column_names]
    values = {c: table.column(c).to_pylist() for c in present}
    for i in range(table.num_rows):
        yield tuple(_hashable(values[c][i]) if c in values else None for c in columns)


def _hashable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # NaN != NaN would make a row differ from itself
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def error_summary(exc: Exception) -> str:
    """The first line of a read error: delta-rs appends a native backtrace to some messages,
    and the first line says what failed."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _snapshot(table: Location) -> DeltaRsSnapshot:
    # The table where it is, as delta-rs finds it: the checker looks at the files a crash left.
    return DeltaRsSnapshot(table, open_delta_table(table))
