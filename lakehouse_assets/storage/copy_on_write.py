"""Changing rows in place, copy-on-write, with the work on Spark's executors.

Guarantee: a merge changes the table in one commit that removes the data files holding a
key it changes and adds those files' new contents; rows of other files are not read, and
only file names pass through the driver, never rows. Replayed batches are skipped by their
app transaction, as every write is (:meth:`TableStore.replace_files`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.storage.engine import AppTransaction, CommitResult, TableStore

_FILE = "__lakehouse_file"
#: Commit metadata of a merge: the key columns it matched rows on (a JSON list).
MERGE_KEYS = "lakehouse.mergeKeys"


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


def merge_rows(store: TableStore, df: DataFrame, path: str, *, keys: Sequence[str],
               transaction: AppTransaction | None = None, metadata: Mapping[str, Any] | None = None) -> CommitResult:
    """Upsert ``df`` into the existing table at ``path`` by ``keys``: a row whose keys match
    replaces the table's row (keeping the table's values of columns ``df`` lacks), the others
    are inserted. Null keys match null keys. ``df``'s columns must already be the table's
    (or a subset)."""
    spark = df.sparkSession
    df = df.persist()  # read to find the files, then written: a stream's batch is computed once
    try:
        key_list = list(keys)
        changed = df.select(*key_list).distinct()
        replaced, rows = files_holding(store, spark, path, changed, key_list)
        merged = df
        if rows is not None:
            kept_values = [c for c in rows.columns if c not in df.columns]
            if kept_values:
                theirs = rows.select(*[F.col(k).alias(f"__old_{k}") for k in key_list], *kept_values)
                on = reduce(lambda a, b: a & b, [df[k].eqNullSafe(theirs[f"__old_{k}"]) for k in key_list])
                merged = df.join(theirs, on, "left").drop(*[f"__old_{k}" for k in key_list])
            merged = matching_keys(rows, changed, key_list, "left_anti").unionByName(merged, allowMissingColumns=True)
        # What the merge wrote is the batch's rows, not the untouched rows carried along.
        return store.replace_files(merged, path, replaced=replaced, transaction=transaction, operation="MERGE",
                                   metadata={**(metadata or {}), MERGE_KEYS: json.dumps(key_list)},
                                   rows_changed=df.count(), row_identity=key_list)
    finally:
        df.unpersist()


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
