"""Delta tables on delta-rs, compute on Spark.

Spark's executors write the Parquet data files; the driver commits them to the Delta log
with delta-rs in one transaction, with statistics taken from the Parquet footers. Files a
failed write leaves behind are never in the log, so no reader sees them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import deltalake
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse_assets.errors import LakehouseError, NotADeltaTableError, UnsupportedTableError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.storage import change_feed, engine, maintenance
from lakehouse_assets.storage._commit import (
    META_BATCH,
    META_OPERATION,
    META_QUERY,
    META_ROWS,
    add_columns,
    already_committed,
    commit_properties,
    listed_files,
    with_properties,
)
from lakehouse_assets.storage._files import locate
from lakehouse_assets.storage._schema import plan_write, spark_to_arrow
from lakehouse_assets.storage._staging import holds_only_staging_folders, stage_files
from lakehouse_assets.storage.copy_on_write import merge_rows
from lakehouse_assets.storage.delta_rs_snapshot import DeltaRsSnapshot, open_delta_table, spark_schema
from lakehouse_assets.storage.engine import (
    AppTransaction,
    CommitResult,
    HistoryEntry,
    StreamOptions,
    WriteMode,
)

# Reader features this engine reads correctly by listing files and reading Parquet.
_READABLE_FEATURES = {"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}


class DeltaRsTableStore:
    """A :class:`~lakehouse_assets.storage.engine.TableStore` that commits with delta-rs."""

    def __init__(self, storage_options: Mapping[str, str] | None = None) -> None:
        self._storage_options = dict(storage_options) if storage_options else None

    # -- inspecting ---------------------------------------------------------------------------
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

    def stream_has_unread_data(self, checkpoint_location: str) -> bool | None:
        """Whether the Delta-sourced query checkpointed at ``checkpoint_location`` has versions
        to read (None: cannot tell, e.g. no batch yet or another kind of source)."""
        from lakehouse_assets.storage.source import has_unread_data

        return has_unread_data(str(checkpoint_location))

    def table_id(self, path: str) -> str | None:
        """The Delta table's id (its metadata id), or None when there is no table."""
        if not self.exists(path):
            return None
        return str(self._open(path).metadata().id)

    def committed_batch(self, path: str, app_id: str) -> int | None:
        """The last batch id ``app_id`` committed to the table, or None."""
        if not self.exists(path):
            return None
        return self._open(path).transaction_version(app_id)

    def history(self, path: str, *, limit: int | None = None) -> list[HistoryEntry]:
        """Commits newest first, like ``DESCRIBE HISTORY``, with the query and batch that
        wrote each one when a streaming sink did."""
        entries = []
        for commit in self._open(path).history(limit):
            metrics = commit.get("operationMetrics") or {}
            rows = commit.get(META_ROWS)
            if rows is None:
                inserted = metrics.get("num_target_rows_inserted")
                updated = metrics.get("num_target_rows_updated")
                if inserted is not None or updated is not None:
                    rows = (inserted or 0) + (updated or 0)
            batch = commit.get(META_BATCH)
            entries.append(
                HistoryEntry(
                    version=int(commit["version"]),
                    timestamp=dt.datetime.fromtimestamp(commit["timestamp"] / 1000, tz=dt.UTC),
                    operation=str(commit.get(META_OPERATION) or commit.get("operation") or "UNKNOWN"),
                    parameters=commit.get("operationParameters") or {},
                    rows_written=None if rows is None else int(rows),
                    query=commit.get(META_QUERY),
                    batch_id=None if batch is None else int(batch),
                    metrics=metrics,
                    custom_metadata={k: v for k, v in commit.items() if str(k).startswith("lakehouse.")},
                )
            )
        return entries

    def snapshot(self, path: str, *, version: int | None = None) -> DeltaRsSnapshot:
        """The table at its latest version, or at ``version``, read by delta-rs and pyarrow."""
        return DeltaRsSnapshot(str(path), self._open(path, version=version))

    # -- reading ------------------------------------------------------------------------------
    def read(self, spark: SparkSession, path: str, *, version: int | None = None) -> DataFrame:
        """The table at its latest version, or at ``version`` (time travel). Rows are read
        by Spark's executors from the data files the Delta log lists."""
        table = self._open(path, version=version)
        _check_readable(path, table)
        schema = spark_schema(table)
        uris = table.file_uris()
        if not uris:
            return spark.createDataFrame([], schema)
        reader = spark.read.schema(schema)
        if table.metadata().partition_columns:
            reader = reader.option("basePath", str(path))
        return reader.parquet(*uris)

    def read_stream(self, spark: SparkSession, path: str, options: StreamOptions | None = None) -> DataFrame:
        """The table as a streaming source: each committed version's new rows, once; or,
        with ``read_change_feed``, its change data feed."""
        from lakehouse_assets.storage.source import read_delta_stream

        table = self._open(path)
        _check_readable(path, table)
        options = options or StreamOptions()
        schema = spark_schema(table)
        if options.read_change_feed:
            if not change_feed.records_changes(table):
                raise LakehouseError(
                    f"Delta table {path} keeps no change data feed to read: set its table property "
                    f"{change_feed.CHANGE_DATA_FEED} = true (where it is defined), then rebuild it with a full "
                    "refresh so that the feed covers every version.")
            schema = change_feed.change_feed_schema(schema)
        return read_delta_stream(spark, str(path), schema, options)

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
        properties: Mapping[str, str] | None = None,
    ) -> CommitResult:
        """Append to or overwrite the table in one commit; create it if it does not exist.

        With ``transaction``, a batch the table already holds is skipped, and the commit
        records the batch so a replay is skipped too. ``properties`` are table properties
        (``delta.*``) the table is created with, or given if it lacks them.
        """
        if mode == "merge":
            raise LakehouseError(f"A merge into {path} needs its key columns: write it with merge(df, path, keys=...)")
        if mode not in ("append", "overwrite"):
            raise LakehouseError(f"Unknown write mode {mode!r} for {path}: use 'append' or 'overwrite'")
        path = str(path)
        table = self._open_for_write(path)
        if table is not None and already_committed(table, transaction):
            return CommitResult(path, None, skipped=True)
        if table is not None:
            table = with_properties(table, properties)
        current = spark_schema(table) if table is not None else None
        plan = plan_write(
            path, current, df.schema,
            merge_schema=merge_schema, overwrite_schema=mode == "overwrite" and overwrite_schema,
        )
        staged = stage_files(_apply_casts(df, plan.casts), path)
        fault_point("delta.files_written")
        rows = sum(f.num_rows for f in staged)
        if table is not None and mode == "append" and rows == 0 and not plan.new_columns and transaction is None:
            return CommitResult(path, None)
        # With a transaction, an empty batch still commits (no data files, only the app
        # transaction): the table then says which batch its query reached, which is how a
        # checkpoint is checked against it and rebuilt from it.
        actions = [
            AddAction(
                path=f.relative_path,
                size=f.size,
                partition_values={},
                modification_time=f.modification_time_ms,
                data_change=True,
                stats=f.stats,
            )
            for f in staged
        ]
        commit = commit_properties(operation, transaction, rows, metadata)
        properties_given = dict(properties) if properties else None
        delta_schema = deltalake.Schema.from_arrow(spark_to_arrow(plan.table_schema))
        try:
            if table is not None and mode == "append" and plan.new_columns:
                add_columns(table, plan.table_schema, plan.new_columns, commit)
            if table is None:
                create_table_with_add_actions(
                    path, delta_schema, actions, mode="error", configuration=properties_given,
                    storage_options=self._storage_options, commit_properties=commit,
                )
            else:
                table.create_write_transaction([*actions], mode=mode, schema=delta_schema, commit_properties=commit)
        except DeltaError as exc:
            raise LakehouseError(
                f"Commit to Delta table {path} failed: {exc}. No rows were made visible; retry the write.") from exc
        fault_point("delta.committed")
        return CommitResult(
            path,
            self.version(path),
            rows_written=rows,
            files_written=len(staged),
            bytes_written=sum(f.size for f in staged),
        )

    def merge(
        self,
        df: DataFrame,
        path: str,
        *,
        keys: Sequence[str],
        merge_schema: bool = False,
        transaction: AppTransaction | None = None,
        metadata: Mapping[str, Any] | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> CommitResult:
        """Upsert by ``keys``: rows whose keys match are updated (columns the batch lacks keep
        their values), the others inserted, in one commit. Copy-on-write on the executors
        (:mod:`lakehouse_assets.storage.copy_on_write`): only the files holding a changed key
        are rewritten. ``properties``: as :meth:`write`."""
        if not keys:
            raise LakehouseError(f"Merge into {path} needs at least one key column")
        path = str(path)
        table = self._open_for_write(path)
        if table is None:
            return self.write(df, path, mode="append", transaction=transaction, operation="MERGE", metadata=metadata,
                              properties=properties)
        if already_committed(table, transaction):
            return CommitResult(path, None, skipped=True)
        table = with_properties(table, properties)
        missing = [k for k in keys if k not in df.columns]
        if missing:
            raise LakehouseError(f"Merge into {path}: key columns {missing} are not in the data ({df.columns})")
        plan = plan_write(path, spark_schema(table), df.schema, merge_schema=merge_schema)
        if plan.new_columns:
            add_columns(table, plan.table_schema, plan.new_columns,
                        commit_properties("MERGE", transaction, None, metadata))
        return merge_rows(self, _apply_casts(df, plan.casts), path, keys=keys, transaction=transaction,
                          metadata=metadata)

    def replace_files(
        self,
        df: DataFrame,
        path: str,
        *,
        replaced: Sequence[str],
        transaction: AppTransaction | None = None,
        operation: str = "MERGE",
        metadata: Mapping[str, Any] | None = None,
        rows_changed: int | None = None,
        row_identity: Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> CommitResult:
        """Copy-on-write: remove the data files ``replaced`` (paths as the log lists them) and
        add ``df``'s rows as new files, in one commit; create the table if there is none.

        The executors compute and write ``df`` (typically the rows of ``replaced`` with their
        changes applied); only the file names pass through the driver. With ``transaction``,
        a batch the table already holds is skipped. Files the table no longer lists are
        refused: they were replaced by another writer since ``df`` was read. The commit
        records ``rows_changed`` as the rows written when given (a merge's batch, not the
        untouched rows its files carry along), else every row of the new files.

        ``properties`` are table properties the table is created with, or given if it lacks
        them. A table keeping a change data feed (:mod:`~lakehouse_assets.storage.change_feed`)
        records the commit's row changes in it, updates paired by ``row_identity``.
        """
        path = str(path)
        table = self._open_for_write(path)
        if table is None:
            if replaced:
                raise LakehouseError(f"Cannot replace files {list(replaced)[:3]} of {path}: there is no table there")
            return self.write(df, path, mode="append", transaction=transaction, operation=operation,
                              metadata=metadata, properties=properties)
        if already_committed(table, transaction):
            return CommitResult(path, None, skipped=True)
        table = with_properties(table, properties)
        listed = {action["path"]: action for action in listed_files(table)}
        gone = [name for name in replaced if name not in listed]
        if gone:
            raise LakehouseError(
                f"Files {gone[:3]} of Delta table {path} are no longer in its log: another writer replaced them "
                "since they were read. Retry the batch.")
        plan = plan_write(path, spark_schema(table), df.schema, merge_schema=False)
        staged = stage_files(_apply_casts(df, plan.casts), path)
        fault_point("delta.files_written")
        rows = sum(f.num_rows for f in staged) if rows_changed is None else rows_changed
        if replaced and change_feed.records_changes(table):
            version = change_feed.replace_with_changes(
                df.sparkSession, path, table, plan.table_schema, removed=[listed[name] for name in replaced],
                added=staged, row_identity=row_identity, transaction=transaction,
                custom_metadata=commit_properties(operation, transaction, rows, metadata).custom_metadata or {})
            fault_point("delta.committed")
            return CommitResult(path, version, rows_written=rows, files_written=len(staged),
                                bytes_written=sum(f.size for f in staged))
        now_ms = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
        removes = [RemoveAction(path=name, data_change=True, deletion_timestamp=now_ms,
                                size=int(listed[name]["size_bytes"]), partition_values={}) for name in replaced]
        adds = [AddAction(path=f.relative_path, size=f.size, partition_values={},
                          modification_time=f.modification_time_ms, data_change=True, stats=f.stats)
                for f in staged]
        try:
            table.create_write_transaction([*removes, *adds], mode="append",
                                           schema=deltalake.Schema.from_arrow(spark_to_arrow(plan.table_schema)),
                                           commit_properties=commit_properties(operation, transaction, rows, metadata))
        except DeltaError as exc:
            raise LakehouseError(
                f"Commit to Delta table {path} failed: {exc}. No change was made visible; retry the batch.") from exc
        fault_point("delta.committed")
        return CommitResult(path, self.version(path), rows_written=rows, files_written=len(staged),
                            bytes_written=sum(f.size for f in staged))

    # -- maintenance: storage/maintenance.py ------------------------------------------------
    def optimize(self, path: str, *, target_size: int | None = None,
                 z_order: Sequence[str] | None = None) -> engine.OptimizeResult:
        """Compact (or Z-order) the table in one commit changing no rows."""
        return maintenance.optimize(self._open(path), str(path), target_size=target_size, z_order=z_order)

    def vacuum(self, path: str, *, retention: dt.timedelta, dry_run: bool,
               readers: Sequence[engine.StreamReader]) -> engine.VacuumResult:
        """Delete files unlisted for longer than ``retention`` that none of ``readers`` needs."""
        return maintenance.vacuum(self._open(path), str(path), retention=retention, dry_run=dry_run, readers=readers)

    def drop(self, path: str) -> None:
        """Delete the table folder and everything in it."""
        location = locate(str(path))
        if location.exists():
            location.fs.delete_dir(location.path)

    # -- internals ----------------------------------------------------------------------------
    def _open(self, path: str, *, version: int | None = None) -> DeltaTable:
        return open_delta_table(path, version=version, storage_options=self._storage_options)

    def _open_for_write(self, path: str) -> DeltaTable | None:
        if self.exists(path):
            table = self._open(path)
            # Spark writes files under the logical column names; in a table this engine
            # cannot read (column mapping), such files would corrupt it for every reader.
            _check_readable(path, table)
            return table
        location = locate(path)
        if not location.is_empty_or_missing() and not holds_only_staging_folders(location):
            raise NotADeltaTableError(path)
        return None


def _check_readable(path: str, table: DeltaTable) -> None:
    protocol = table.protocol()
    features = set(protocol.reader_features or [])
    unsupported = features - _READABLE_FEATURES
    # Column mapping (reader version 2 lists no features) stores columns under physical
    # names that Spark's Parquet reader does not know: it would read every column as null.
    if (table.metadata().configuration or {}).get("delta.columnMapping.mode", "none") != "none":
        unsupported.add("columnMapping")
    if protocol.min_reader_version > 3 or unsupported:
        raise UnsupportedTableError(
            f"Delta table {path} needs reader features {sorted(unsupported) or protocol.min_reader_version} "
            "that the delta-rs storage engine cannot read through Spark. Rewrite the table without them "
            "(for example, purge deletion vectors) or read it with a native Delta engine."
        )


def _apply_casts(df: DataFrame, casts: Mapping[str, T.DataType]) -> DataFrame:
    if not casts:
        return df
    return df.select(*[F.col(f"`{c}`").cast(casts[c]).alias(c) if c in casts else F.col(f"`{c}`") for c in df.columns])


__all__ = ["DeltaRsTableStore"]
