"""Delta tables through Delta Lake's own connector (delta-spark), read without Spark by delta-rs.

Spark writes, merges and streams every table with Delta Lake's connector: ``format("delta")``
sources and writes, ``MERGE INTO``, Delta's transaction ids for exactly-once batches. What a
process without Spark needs (whether a table exists, its version, history and files) is
read from the log by delta-rs, which only reads.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import pyarrow.fs as pafs
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.readwriter import DataStreamWriter

from lakehouse_assets.errors import LakehouseError, NotADeltaTableError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.location import Location, ObjectStore, locate
from lakehouse_assets.spark_conf import session_settings
from lakehouse_assets.storage import engine, maintenance
from lakehouse_assets.storage._schema import type_sql
from lakehouse_assets.storage.batch_record import (
    BATCH_KEY,
    MERGE_KEYS_KEY,
    OPERATION_KEY,
    QUERY_KEY,
    parse_metadata,
    user_metadata,
)
from lakehouse_assets.storage.conform import allows, conformed
from lakehouse_assets.storage.declared_types import DeclaredTypes
from lakehouse_assets.storage.delta_rs_snapshot import DeltaRsSnapshot, open_delta_table, spark_schema
from lakehouse_assets.storage.engine import (
    AppTransaction,
    CommitResult,
    HistoryEntry,
    StreamOptions,
    WriteMode,
)
from lakehouse_assets.storage.layout import TableLayout, create_table, recluster, table_ref
from lakehouse_assets.storage.merge import MergePlan, merge_statement, quote

CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
#: A table's stream is aliased ``delta:<path>``: Delta's streaming relation does not print its
#: path in a query plan, and column lineage reads plans.
STREAM_ALIAS_PREFIX = "delta:"

# Session settings Delta reads for the commits of MERGE, UPDATE and DELETE.
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
# The operation of a commit made by Delta's streaming sink.
_STREAMING_UPDATE = "STREAMING UPDATE"


class DeltaTableStore:
    """Batch and streaming access to the Delta tables at storage paths: Delta Lake's connector
    writes, streams and merges them in Spark; delta-rs reads them in processes without Spark."""

    def __init__(self, object_store: ObjectStore | None = None) -> None:
        self._object_store = object_store or ObjectStore()
        self._storage_options = self._object_store.delta_rs_options() or None

    # -- inspecting, without Spark ----------------------------------------------------------
    def exists(self, path: str) -> bool:
        """Whether ``path`` holds a Delta table."""
        return DeltaTable.is_deltatable(str(path), storage_options=self._storage_options)

    def version(self, path: str) -> int | None:
        """The latest version, or None when there is no table."""
        if not self.exists(path):
            return None
        return self._open(path).version()

    def schema(self, path: str) -> T.StructType:
        """The table's current schema as Spark sees it."""
        return spark_schema(self._open(path))

    def table_id(self, path: str) -> str | None:
        """The Delta table's id (its metadata id), or None when there is no table."""
        if not self.exists(path):
            return None
        return self.snapshot(path).table_id

    def committed_batch(self, path: str, app_id: str) -> int | None:
        """The last batch id ``app_id`` committed to the table, or None."""
        if not self.exists(path):
            return None
        return self._open(path).transaction_version(app_id)

    def history(self, path: str, *, limit: int | None = None) -> list[HistoryEntry]:
        """Commits newest first, like ``DESCRIBE HISTORY``, with the query and batch that
        wrote each one when a streaming sink did."""
        return table_history(locate(path, self._object_store), limit=limit)

    def snapshot(self, path: str, *, version: int | None = None) -> DeltaRsSnapshot:
        """The table at its latest version, or at ``version``, read by delta-rs and pyarrow."""
        return DeltaRsSnapshot(locate(path, self._object_store), self._open(path, version=version))

    # -- reading ------------------------------------------------------------------------------
    def read(self, spark: SparkSession, path: str, *, version: int | None = None) -> DataFrame:
        """The table at its latest version, or at ``version`` (time travel)."""
        self._open(path, version=version)  # a missing table, or a version it lacks, is named
        options = {} if version is None else {"versionAsOf": str(version)}
        return spark.read.format("delta").options(**options).load(str(path))

    def read_stream(self, spark: SparkSession, path: str, options: StreamOptions | None = None) -> DataFrame:
        """The table as Delta's streaming source: each committed version's new rows, once;
        or, with ``read_change_feed``, its change data feed."""
        table = self._open(path)
        options = options or StreamOptions()
        if options.read_change_feed and not allows(table, CHANGE_DATA_FEED):
            raise LakehouseError(
                f"Delta table {path} keeps no change data feed to read: set its table property "
                f"{CHANGE_DATA_FEED} = true (where it is defined), then rebuild it with a full "
                "refresh so that the feed covers every version.")
        stream = spark.readStream.format("delta").options(**options.reader_options()).load(str(path))
        return stream.alias(STREAM_ALIAS_PREFIX + str(path))

    # -- writing ------------------------------------------------------------------------------
    def write(
        self,
        df: DataFrame,
        path: str,
        *,
        mode: WriteMode = "append",
        merge_schema: bool = False,
        overwrite_schema: bool = False,
        transaction: AppTransaction | None = None,
        operation: str = "WRITE",
        metadata: Mapping[str, Any] | None = None,
        layout: TableLayout | None = None,
        declared: DeclaredTypes | None = None,
    ) -> CommitResult:
        """Append to or overwrite the table in one commit; create it if it does not exist.

        With ``transaction``, a batch the table already holds is skipped (Delta's
        ``txnAppId``/``txnVersion``), and the commit records the batch so a replay is
        skipped too; an empty batch still commits, so the table says which batch its query
        reached. ``layout``: the properties and partition or clustering columns the table is
        created with (properties and clustering are given to it if it lacks them); ``declared``,
        the column types its definition declares, which the rows are cast to first.
        """
        if mode == "merge":
            raise LakehouseError(f"A merge into {path} needs its key columns: write it with merge(df, path, keys=...)")
        if mode not in ("append", "overwrite"):
            raise LakehouseError(f"Unknown write mode {mode!r} for {path}: use 'append' or 'overwrite'")
        path = str(path)
        table = self._open_for_write(path)
        if _already_committed(table, transaction):
            return CommitResult(path, None, skipped=True)
        rows, plan = conformed(df, path, table, merge_schema=merge_schema,
                               overwrite_schema=mode == "overwrite" and overwrite_schema, layout=layout,
                               declared=declared)
        table = self._created_first(rows, path, table, layout, by_stream=False)
        writer = rows.write.format("delta").mode(mode)
        if plan.new_columns:
            writer = writer.option("mergeSchema", "true")
        if mode == "overwrite" and overwrite_schema:
            writer = writer.option("overwriteSchema", "true")
        if transaction is not None:
            writer = writer.option("txnAppId", transaction.app_id).option("txnVersion", transaction.batch_id)
        if layout is not None and table is None:
            writer = layout.creating(writer)
        elif layout is not None and mode == "overwrite":
            writer = layout.overwriting(writer)
        writer = writer.option("userMetadata", _user_metadata(operation, transaction, metadata))
        before = table.version() if table is not None else None
        fault_point("delta.files_written")
        writer.save(path)
        fault_point("delta.committed")
        committed = self._committed(path, after=before)
        if mode == "overwrite" and layout is not None and layout.clustered_by:
            recluster(rows.sparkSession, path, layout)  # Delta's overwrite drops it
        return committed

    def stream_writer(self, df: DataFrame, path: str, *, merge_schema: bool = False,
                      layout: TableLayout | None = None,
                      metadata: Mapping[str, Any] | None = None,
                      declared: DeclaredTypes | None = None) -> DataStreamWriter:
        """The streaming DataFrame ``df``'s writer into the table through Delta's own
        streaming sink (checkpoint and trigger still to set), its rows fitted to the table
        as :meth:`write` fits a batch's. Delta records each batch's app transaction (query
        id, batch id) and ``metadata``, the same text for every batch of the query."""
        path = str(path)
        table = self._open_for_write(path)
        rows, plan = conformed(df, path, table, merge_schema=merge_schema, layout=layout, declared=declared)
        table = self._created_first(rows, path, table, layout, by_stream=True)
        writer = rows.writeStream.format("delta").option("path", path)
        if plan.new_columns:
            writer = writer.option("mergeSchema", "true")
        if table is None and layout is not None:
            writer = layout.creating(writer)
        return writer.option("userMetadata", user_metadata(metadata or {}))

    def merge(
        self,
        df: DataFrame,
        path: str,
        *,
        keys: Sequence[str],
        replacing: DataFrame | None = None,
        merge_schema: bool = False,
        transaction: AppTransaction | None = None,
        operation: str = "MERGE",
        metadata: Mapping[str, Any] | None = None,
        layout: TableLayout | None = None,
        declared: DeclaredTypes | None = None,
    ) -> CommitResult:
        """Upsert by ``keys`` with Delta's ``MERGE INTO``, in one commit: rows whose keys
        match (null matching null) are updated where the batch changes them (columns the
        batch lacks keep their values), the others inserted. With ``replacing`` (groups, by
        some key columns), the table's rows of those groups the batch has no row for are
        deleted. ``layout``, ``declared``: as :meth:`write`."""
        if not keys:
            raise LakehouseError(f"Merge into {path} needs at least one key column")
        path = str(path)
        table = self._open_for_write(path)
        metadata = {**(metadata or {}), MERGE_KEYS_KEY: json.dumps(list(keys))}
        if table is None:
            return self.write(df, path, mode="append", transaction=transaction, operation=operation,
                              metadata=metadata, layout=layout, declared=declared)
        if _already_committed(table, transaction):
            return CommitResult(path, None, skipped=True)
        missing = [k for k in keys if k not in df.columns]
        if missing:
            raise LakehouseError(f"Merge into {path}: key columns {missing} are not in the data ({df.columns})")
        spark = df.sparkSession
        rows, plan = conformed(df, path, table, merge_schema=merge_schema, layout=layout, declared=declared)
        if plan.new_columns:
            added = ", ".join(f"{quote(f.name)} {type_sql(f.dataType)}"
                              for f in plan.table_schema.fields if f.name in plan.new_columns)
            spark.sql(f"ALTER TABLE {table_ref(path)} ADD COLUMNS ({added})")
        merge = MergePlan(table_ref(path), rows, keys, replacing)
        with merge_statement(merge) as statement, \
                _commit_settings(spark, transaction, _user_metadata(operation, transaction, metadata)):
            spark.sql(statement)
        fault_point("delta.committed")
        return self._committed(path, after=table.version())

    # -- maintenance: storage/maintenance.py ------------------------------------------------
    def optimize(self, spark: SparkSession, path: str, *, target_size: int | None = None,
                 z_order: Sequence[str] | None = None) -> engine.OptimizeResult:
        """Compact (or Z-order) the table with Delta's OPTIMIZE, in one commit changing no rows."""
        return maintenance.optimize(spark, locate(path, self._object_store), self.schema(path).names,
                                    target_size=target_size, z_order=z_order)

    def vacuum(self, spark: SparkSession, path: str, *, retention: dt.timedelta, dry_run: bool,
               readers: Sequence[engine.StreamReader]) -> engine.VacuumResult:
        """Delete files unlisted for longer than ``retention`` that none of ``readers`` needs
        (Delta's VACUUM)."""
        self._open(path)  # a missing table is named as such
        return maintenance.vacuum(spark, locate(path, self._object_store), retention=retention, dry_run=dry_run,
                                  readers=readers)

    def drop(self, path: str) -> None:
        """Delete the table folder and everything in it."""
        locate(path, self._object_store).remove()

    # -- internals ----------------------------------------------------------------------------
    def _open(self, path: str, *, version: int | None = None) -> DeltaTable:
        return open_delta_table(locate(path, self._object_store), version=version)

    def _created_first(self, rows: DataFrame, path: str, table: DeltaTable | None, layout: TableLayout | None, *,
                       by_stream: bool) -> DeltaTable | None:
        """The table, created first when it is new and its writer cannot lay it out (Delta's
        writers ignore a path's clustering, its streaming sink the table properties); else
        ``table`` as it was."""
        if table is not None or layout is None or not (layout.clustered_by or (by_stream and layout.properties)):
            return table
        create_table(rows.sparkSession, path, rows.schema, layout)
        return self._open(path)

    def _open_for_write(self, path: str) -> DeltaTable | None:
        if self.exists(path):
            return self._open(path)
        location = locate(path, self._object_store)
        if not location.is_empty_or_missing() and not _holds_only_unlisted_data_files(location):
            raise NotADeltaTableError(path)
        return None

    def _committed(self, path: str, *, after: int | None) -> CommitResult:
        """What the newest commit of the table wrote, if it is newer than version ``after``
        (Delta commits nothing for an append of no rows): the table has one writer at a
        time (its lock), so the newest commit is the one just made."""
        entry = self.history(path, limit=1)[0]
        if after is not None and entry.version <= after:
            return CommitResult(path, None)
        return CommitResult(path, entry.version, rows_written=entry.rows_written or 0)


def _holds_only_unlisted_data_files(location: Location) -> bool:
    """Whether a folder that is no Delta table holds only what a failed first write of a table
    leaves behind: Spark's data files (``part-*``, their ``.crc``) that no log lists, and
    perhaps Delta's own folders (``_…``) holding no file. Such a folder takes the table; the
    files stay unlisted (VACUUM deletes them)."""
    infos = location.fs.get_file_info(pafs.FileSelector(location.path, recursive=True))
    return all(info.type != pafs.FileType.File
               or info.base_name.startswith(("part-", ".part-")) and "/_" not in info.path[len(location.path):]
               for info in infos)


def table_history(location: Location, *, limit: int | None = None) -> list[HistoryEntry]:
    """The commits of the Delta table at ``location`` (on a disk, or the store it names), newest
    first, as Delta's history gives them (delta-rs)."""
    return [_history_entry(commit) for commit in open_delta_table(location).history(limit)]


def _history_entry(commit: Mapping[str, Any]) -> HistoryEntry:
    """A commit of the log as a :class:`HistoryEntry`: what the lakehouse recorded from
    ``userMetadata`` (:mod:`~lakehouse_assets.storage.batch_record`), rows from Delta's metrics."""
    custom = parse_metadata(commit.get("userMetadata"))
    metrics = commit.get("operationMetrics") or {}
    inserted = metrics.get("numTargetRowsInserted")
    updated = metrics.get("numTargetRowsUpdated")
    rows = None
    if inserted is not None or updated is not None:
        rows = int(inserted or 0) + int(updated or 0)
    elif metrics.get("numOutputRows") is not None:
        rows = int(metrics["numOutputRows"])
    batch, query = custom.get(BATCH_KEY), custom.get(QUERY_KEY)
    parameters = commit.get("operationParameters") or {}
    if batch is None and commit.get("operation") == _STREAMING_UPDATE and "epochId" in parameters:
        # Delta's own streaming sink names the query and batch of each commit here.
        batch, query = parameters["epochId"], parameters.get("queryId")
    return HistoryEntry(
        version=int(commit["version"]),
        timestamp=dt.datetime.fromtimestamp(commit["timestamp"] / 1000, tz=dt.UTC),
        operation=str(custom.get(OPERATION_KEY) or commit.get("operation") or "UNKNOWN"),
        parameters=parameters,
        rows_written=rows,
        query=query,
        batch_id=None if batch is None else int(batch),
        metrics=metrics,
        custom_metadata=custom,
    )


def _user_metadata(operation: str, transaction: AppTransaction | None, metadata: Mapping[str, Any] | None) -> str:
    """The commit's ``userMetadata``: the operation, the query and batch, and ``metadata``."""
    custom: dict[str, Any] = {OPERATION_KEY: operation}
    if transaction is not None:
        custom[QUERY_KEY] = transaction.app_id
        custom[BATCH_KEY] = transaction.batch_id
    custom.update(metadata or {})
    return user_metadata(custom)


def _commit_settings(spark: SparkSession, transaction: AppTransaction | None,
                     user_metadata: str) -> AbstractContextManager[None]:
    """Delta's session settings for a MERGE's commit (its app transaction and metadata), for
    the statement only."""
    settings = {_USER_METADATA: user_metadata}
    if transaction is not None:
        settings.update({_TXN_APP_ID: transaction.app_id, _TXN_VERSION: str(transaction.batch_id)})
    return session_settings(spark, settings)


def _already_committed(table: DeltaTable | None, transaction: AppTransaction | None) -> bool:
    if table is None or transaction is None:
        return False
    committed = table.transaction_version(transaction.app_id)
    return committed is not None and committed >= transaction.batch_id




__all__ = ["DeltaTableStore", "table_history"]
