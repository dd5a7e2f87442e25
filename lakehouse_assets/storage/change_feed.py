"""Delta's change data feed for tables changed in place.

Guarantee: a version that changes rows of a table with ``delta.enableChangeDataFeed`` records
those row changes (``_change_data/`` files, ``cdc`` actions) in the same commit file as its
data files and its app transaction, so every Delta reader (delta-rs ``load_cdf``, Spark's
``readChangeFeed``, this project's stream source) sees a version's rows and its changes
together or not at all, and a replayed batch records no change twice.

A version's changes are the difference between the files it removes and the files it adds,
paired by the table's row identity (a merge's keys; an SCD type 2 table's keys and
``__START_AT``): a row only in the old files is a ``delete``, one only in the new files an
``insert``, and an identity in both with other values an ``update_preimage`` and
``update_postimage`` pair. Rows a rewrite carries along unchanged are in neither, which is
why copy-on-write needs this at all: without ``cdc`` actions a reader takes every row of a
removed file as deleted and every row of an added one as inserted. A rewrite that changes no
row commits its files with ``dataChange=false``, as compaction does.

delta-rs's Python transactions commit add and remove actions only, so such a version's
commit file is written here, taking the version only if no other writer did (the Delta
protocol's mutual exclusion): created under a temporary name and linked into place, which
fails if the name exists. That needs a file system that can refuse an existing name, and
pyarrow's object stores cannot: change feeds are kept on local tables only.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any, Literal

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.storage._delta_log import Commit, DataFile, commit_file
from lakehouse_assets.storage._files import locate, table_file_path
from lakehouse_assets.storage._staging import StagedFile, stage_files
from lakehouse_assets.storage.copy_on_write import matching_keys
from lakehouse_assets.storage.engine import AppTransaction

#: The table property that turns the change data feed on, as Delta names it.
CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
#: The folder of a table holding its change files.
CHANGE_DATA_FOLDER = "_change_data"
#: The columns a change feed adds to a table's rows.
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)

# Writer features a commit written here keeps the rules of (they add nothing a copy-on-write
# commit of add, remove and cdc actions could break).
_WRITABLE_FEATURES = {"changeDataFeed", "appendOnly", "invariants", "checkConstraints", "timestampNtz"}


def records_changes(table: DeltaTable) -> bool:
    """Whether the table keeps a change data feed (``delta.enableChangeDataFeed``)."""
    return str(table.metadata().configuration.get(CHANGE_DATA_FEED, "false")).lower() == "true"


def row_changes(old: DataFrame, new: DataFrame, identity: Sequence[str] | None) -> DataFrame:
    """The change rows (the table's columns and ``_change_type``) between the rows of the
    files a commit removes (``old``) and those it adds (``new``), updates paired by the
    columns ``identity`` (null matching null); without one, changes are inserts and deletes."""
    deleted = old.exceptAll(new)
    inserted = new.exceptAll(old.select(*new.columns))

    def typed(rows: DataFrame, change_type: str) -> DataFrame:
        return rows.withColumn(CHANGE_TYPE, F.lit(change_type))

    if not identity:
        return typed(deleted, "delete").unionByName(typed(inserted, "insert"))

    def matching(rows: DataFrame, others: DataFrame, how: str) -> DataFrame:
        return matching_keys(rows, others.select(*identity), identity, how)

    return reduce(DataFrame.unionByName, [
        typed(matching(deleted, inserted, "left_semi"), "update_preimage"),
        typed(matching(inserted, deleted, "left_semi"), "update_postimage"),
        typed(matching(deleted, inserted, "left_anti"), "delete"),
        typed(matching(inserted, deleted, "left_anti"), "insert"),
    ])


def commit_with_changes(
    path: str,
    table: DeltaTable,
    *,
    removed: Sequence[Mapping[str, Any]],
    added: Sequence[StagedFile],
    changes: Sequence[StagedFile],
    transaction: AppTransaction | None,
    custom_metadata: Mapping[str, Any],
) -> int:
    """Commit, as the version after ``table``'s, the removal of the files ``removed`` (their
    log entries: path, size_bytes), the data files ``added`` and the change files
    ``changes``, with the batch's app transaction; the version committed. With no change
    file, the rewrite changed no row and its actions say so (``dataChange=false``)."""
    location = locate(path)
    if not isinstance(location.fs, pafs.LocalFileSystem):
        raise LakehouseError(
            f"Delta table {path} keeps a change data feed, which this storage layer commits only on a "
            "local file system (an object store cannot refuse a commit file that exists). Turn "
            f"{CHANGE_DATA_FEED} off for this table, or keep it on a local path.")
    _check_writable(path, table)
    version = table.version() + 1
    now_ms = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    data_change = bool(changes)
    actions: list[dict[str, Any]] = [{"commitInfo": {
        "timestamp": now_ms,
        "operation": str(custom_metadata.get("lakehouse.operation", "MERGE")),
        "operationParameters": {},
        "readVersion": version - 1,
        "isBlindAppend": False,
        "engineInfo": "lakehouse_assets",
        **custom_metadata,
    }}]
    if transaction is not None:
        actions.append({"txn": {"appId": transaction.app_id, "version": transaction.batch_id,
                                "lastUpdated": now_ms}})
    actions += [{"remove": {"path": str(entry["path"]), "deletionTimestamp": now_ms, "dataChange": data_change,
                            "extendedFileMetadata": True, "partitionValues": {},
                            "size": int(entry["size_bytes"])}} for entry in removed]
    actions += [{"add": {"path": f.relative_path, "partitionValues": {}, "size": f.size,
                         "modificationTime": f.modification_time_ms, "dataChange": data_change,
                         "stats": f.stats}} for f in added]
    actions += [{"cdc": {"path": f.relative_path, "partitionValues": {}, "size": f.size, "dataChange": False}}
                for f in changes]
    _create_commit_file(path, commit_file(location, version).path, actions, version)
    return version


def replace_with_changes(
    spark: SparkSession,
    path: str,
    table: DeltaTable,
    table_schema: T.StructType,
    *,
    removed: Sequence[Mapping[str, Any]],
    added: Sequence[StagedFile],
    row_identity: Sequence[str] | None,
    transaction: AppTransaction | None,
    custom_metadata: Mapping[str, Any],
) -> int:
    """The copy-on-write commit of a table keeping a change data feed: the row changes between
    the ``removed`` files (their log entries) and the ``added`` ones, written by the executors
    as change files and committed with them (:func:`commit_with_changes`); the version."""
    def rows_of(relative_paths: Sequence[str]) -> DataFrame:
        if not relative_paths:
            return spark.createDataFrame([], table_schema)
        return spark.read.schema(table_schema).parquet(*[table_file_path(path, p) for p in relative_paths])

    changes = row_changes(rows_of([str(entry["path"]) for entry in removed]),
                          rows_of([f.relative_path for f in added]), row_identity)
    change_files = stage_files(changes, path, under=CHANGE_DATA_FOLDER)
    fault_point("delta.files_written")
    return commit_with_changes(path, table, removed=removed, added=added, changes=change_files,
                               transaction=transaction, custom_metadata=custom_metadata)


def _check_writable(path: str, table: DeltaTable) -> None:
    protocol = table.protocol()
    unknown = set(protocol.writer_features or ()) - _WRITABLE_FEATURES
    if protocol.min_writer_version > 7 or unknown:
        raise LakehouseError(
            f"Delta table {path} needs writer features {sorted(unknown)} (writer version "
            f"{protocol.min_writer_version}) that the change data feed's commit does not keep: turn "
            f"{CHANGE_DATA_FEED} off for it.")
    if str(table.metadata().configuration.get("delta.appendOnly", "false")).lower() == "true":
        raise LakehouseError(f"Delta table {path} is append-only (delta.appendOnly): rows cannot change in it.")


def _create_commit_file(path: str, target: str, actions: Sequence[Mapping[str, Any]], version: int) -> None:
    """Write the commit file at ``target`` only if no writer has: a temporary file linked
    into place, which refuses an existing name atomically."""
    temporary = os.path.join(os.path.dirname(target), f".{version:020d}.json.{uuid.uuid4().hex}.tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        out.write("\n".join(json.dumps(action, separators=(",", ":")) for action in actions) + "\n")
        out.flush()
        os.fsync(out.fileno())
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise LakehouseError(
            f"Another writer committed version {version} of Delta table {path} first; no change was made "
            "visible. Retry the batch.") from None
    finally:
        os.unlink(temporary)


# -- reading ------------------------------------------------------------------------------------

#: The columns a change feed read adds to the table's, as Delta names and types them.
CHANGE_FEED_FIELDS = (
    T.StructField(CHANGE_TYPE, T.StringType()),
    T.StructField(COMMIT_VERSION, T.LongType()),
    T.StructField(COMMIT_TIMESTAMP, T.TimestampType()),
)


def change_feed_schema(table_schema: T.StructType) -> T.StructType:
    """The schema of a table's change data feed: its columns and the change columns."""
    return T.StructType([*table_schema.fields, *CHANGE_FEED_FIELDS])


@dataclass(frozen=True)
class ChangeFile(DataFile):
    """A file of a change feed read: a change file (its rows say their change type), or a
    data file a version added (``insert``) or removed (``delete``)."""

    change_type: Literal["insert", "delete"] | None = None
    commit_version: int = 0
    commit_timestamp_ms: int = 0


def change_files(commit: Commit) -> list[DataFile]:
    """What a version changed, as a change feed reads it: its change files if it wrote any
    (they alone say which rows changed how), else its added files as inserts and its removed
    files as deletes."""
    version, at_ms = commit.version, commit.timestamp_ms
    if commit.changes:
        return [ChangeFile(f.path, f.size, f.partition_values, None, version, at_ms) for f in commit.changes]
    return [
        *[ChangeFile(f.path, f.size, f.partition_values, "insert", version, at_ms) for f in commit.added],
        *[ChangeFile(f.path, f.size, f.partition_values, "delete", version, at_ms) for f in commit.removed],
    ]


def with_change(batch: pa.RecordBatch, change_type: str | None, version: int, at_ms: int) -> pa.RecordBatch:
    """The batch with its change columns filled in: the change type of a data file's rows
    (a change file's rows carry their own), the version and its commit time."""
    columns = dict(zip(batch.schema.names, batch.columns, strict=True))
    rows = batch.num_rows
    if change_type is not None:
        columns[CHANGE_TYPE] = pa.array([change_type] * rows, pa.string())
    columns[COMMIT_VERSION] = pa.array([version] * rows, pa.int64())
    columns[COMMIT_TIMESTAMP] = pa.array([at_ms * 1000] * rows, pa.timestamp("us", tz="UTC")).cast(
        batch.schema.field(COMMIT_TIMESTAMP).type)
    return pa.RecordBatch.from_arrays([columns[name] for name in batch.schema.names], schema=batch.schema)
