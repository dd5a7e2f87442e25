"""Changing rows in place, copy-on-write, with the work on Spark's executors.

Guarantee: a merge changes the table in one commit that removes the data files holding a
key it changes and adds those files' new contents; rows of other files are not read, and
only file names pass through the driver, never rows. Replayed batches are skipped by their
app transaction, as every write is (:meth:`TableStore.replace_files`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.storage.engine import AppTransaction, CommitResult, TableStore

_FILE = "__lakehouse_file"


def files_holding(store: TableStore, spark: SparkSession, path: str, keys_df: DataFrame,
                  keys: Sequence[str], *, within_range: Sequence[str] = ()) -> tuple[list[str], DataFrame | None]:
    """The data files of the table at ``path`` holding a key of ``keys_df`` (as its log names
    them), and all the rows of those files; ``([], None)`` when none does. With
    ``within_range``, the search reads only the table's rows within ``keys_df``'s range of
    those columns (:func:`in_range_of`): for a table clustered by them, a few files."""
    if not store.exists(path):
        return [], None
    snapshot = store.snapshot(path)
    by_location = {_location(f.path): f.relative_path for f in snapshot.files()}
    if not by_location:
        return [], None
    rows = store.read(spark, path, version=snapshot.version).withColumn(_FILE, F.col("_metadata.file_path"))
    searched = in_range_of(rows, keys_df, within_range) if within_range else rows
    found = [r[0] for r in matching_keys(searched, keys_df, keys, "left_semi").select(_FILE).distinct().collect()]
    if not found:
        return [], None
    unknown = [f for f in found if _location(f) not in by_location]
    if unknown:
        raise LakehouseError(f"Files {unknown[:3]} read from Delta table {path} are not in its version "
                             f"{snapshot.version}: it changed while it was read. Retry the batch.")
    return [by_location[_location(f)] for f in found], rows.filter(F.col(_FILE).isin(found)).drop(_FILE)


def matching_keys(rows: DataFrame, keys_df: DataFrame, keys: Sequence[str], how: str) -> DataFrame:
    """``rows`` whose keys are (``left_semi``) or are not (``left_anti``) in ``keys_df``,
    null keys matching null keys: a group whose key is null is one group, merged in place."""
    on = reduce(lambda a, b: a & b, [rows[k].eqNullSafe(keys_df[k]) for k in keys])
    return rows.join(keys_df, on, how)


def in_range_of(rows: DataFrame, batch: DataFrame, columns: Sequence[str]) -> DataFrame:
    """``rows`` within ``batch``'s range (its least to its greatest value) of each of
    ``columns``: a filter Spark pushes to the Parquet reader, which skips the row groups
    outside it. Costs one small job on ``batch``; no rows when it has none."""
    bounds = batch.agg(*[agg(F.col(c)).alias(f"{name}_{c}") for c in columns
                         for name, agg in (("lo", F.min), ("hi", F.max))]).first()
    kept = rows
    for c in columns:
        low, high = (None, None) if bounds is None else (bounds[f"lo_{c}"], bounds[f"hi_{c}"])
        if low is None:
            return rows.limit(0)
        kept = kept.where(F.col(c).between(F.lit(low), F.lit(high)))
    return kept


def _location(path_or_uri: str) -> str:
    """A local path or a ``file:`` URI as one comparable absolute path."""
    parsed = urlparse(path_or_uri)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else path_or_uri


def replace_files(
    store: TableStore,
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
    import deltalake
    from deltalake.exceptions import DeltaError
    from deltalake.transaction import AddAction, RemoveAction

    from lakehouse_assets.faults import fault_point
    from lakehouse_assets.storage import change_feed
    from lakehouse_assets.storage._commit import already_committed, commit_properties, listed_files, with_properties
    from lakehouse_assets.storage._schema import plan_write, spark_to_arrow
    from lakehouse_assets.storage._staging import stage_files
    from lakehouse_assets.storage.delta_rs_snapshot import open_delta_table, spark_schema

    if not store.exists(path):
        if replaced:
            raise LakehouseError(f"Cannot replace files {list(replaced)[:3]} of {path}: there is no table there")
        return store.write(df, path, mode="append", transaction=transaction, operation=operation,
                           metadata=metadata, properties=properties)
    table = open_delta_table(path)
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
    if plan.casts:
        df = df.select(*[F.col(f"`{c}`").cast(plan.casts[c]).alias(c) if c in plan.casts else F.col(f"`{c}`")
                         for c in df.columns])
    staged = stage_files(df, path)
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
    return CommitResult(path, store.version(path), rows_written=rows, files_written=len(staged),
                        bytes_written=sum(f.size for f in staged))
