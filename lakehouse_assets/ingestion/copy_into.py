"""COPY INTO: an idempotent batch load of the files in a folder into a Delta table.

The files a load takes are written to ``<table>/_copy_into/<n>.json`` before its commit, and
the commit records the app transaction (``lakehouse.copy_into``, ``n``); a manifest counts only
once the table's transaction has reached its number, so a load that failed before its commit
is loaded again next time. The memory travels with the table (a full refresh forgets it), and
Delta readers and vacuum ignore ``_`` folders. Run one COPY INTO per table at a time.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from lakehouse_assets.ingestion.errors import CopyIntoError, IngestionOptionsError
from lakehouse_assets.ingestion.files import LandedFile, glob_matches, list_data_files
from lakehouse_assets.ingestion.options import SourceFormat
from lakehouse_assets.location import locate
from lakehouse_assets.storage import AppTransaction, DeltaTableStore

COPY_INTO_APP_ID = "lakehouse.copy_into"
MANIFESTS_DIR = "_copy_into"
_FORMATS = ("json", "csv", "parquet")


@dataclass(frozen=True)
class CopyIntoResult:
    """What one COPY INTO did: the files it loaded and skipped (as Spark spells their paths),
    the rows it wrote, the table version holding them, and the load's number."""

    table_path: str
    loaded: tuple[str, ...]
    skipped: tuple[str, ...]
    rows_written: int
    version: int | None
    load_id: int | None


def copy_into(
    spark: SparkSession,
    *,
    table_path: str | os.PathLike[str],
    source: str | os.PathLike[str],
    format: SourceFormat,  # noqa: A002 - COPY INTO's FILEFORMAT
    pattern: str | None = None,
    force: bool = False,
    merge_schema: bool = False,
    format_options: Mapping[str, str] | None = None,
    store: DeltaTableStore,
) -> CopyIntoResult:
    """Load the files in ``source`` (and its subfolders) that the table has not loaded yet.

    ``pattern`` is a glob over the paths relative to ``source`` (``"2024-*/part-{1,2}.json"``).
    ``force`` loads matching files again. ``merge_schema`` lets the files add columns to the
    table; without it new columns are an error naming them. ``format_options`` go to Spark's
    reader. The table is created by the first load. Files are recognised by path: a file
    rewritten under a loaded name is skipped unless ``force``. A load of only empty files
    commits nothing, so they are listed as loaded again, with no rows, next time.
    """
    if format not in _FORMATS:
        raise IngestionOptionsError(f"COPY INTO cannot read format {format!r}: use one of {', '.join(_FORMATS)}")
    table = str(table_path)
    listed = list_data_files(str(source), recursive=True)
    matching = [f for f in listed if pattern is None or glob_matches(f.relative_path, pattern)]
    already = {f.path for f in copied_files(table, store=store)} if not force else set()
    to_load = [f for f in matching if f.path not in already]
    skipped = tuple(f.path for f in matching if f.path in already)
    if not to_load:
        return CopyIntoResult(table, (), skipped, 0, None, None)

    reader = spark.read.format(format)
    for key, value in (format_options or {}).items():
        reader = reader.option(key, str(value))
    try:
        df = reader.load([f.path for f in to_load])
    except Exception as exc:  # Spark raises several types; all mean the files cannot be read
        raise CopyIntoError(f"COPY INTO {table}: cannot read the {format} files in {source}: {exc}") from exc

    if not df.columns:
        # Only empty files: no records, no schema, nothing to commit. Without a commit they are
        # not remembered, so a later run lists them as loaded again, still with no rows.
        return CopyIntoResult(table, tuple(f.path for f in to_load), skipped, 0, None, None)
    if not store.exists(table):
        # The manifest goes inside the table folder, which must be a table first.
        store.write(df.limit(0), table, operation="CREATE TABLE", metadata={"lakehouse.copyInto.source": str(source)})
    last = store.committed_batch(table, COPY_INTO_APP_ID)
    load_id = 0 if last is None else last + 1
    _write_manifest(table, load_id, to_load, source=str(source), force=force)
    result = store.write(
        df,
        table,
        mode="append",
        merge_schema=merge_schema,
        transaction=AppTransaction(COPY_INTO_APP_ID, load_id),
        operation="COPY INTO",
        metadata={"lakehouse.copyInto.files": len(to_load), "lakehouse.copyInto.source": str(source)},
    )
    return CopyIntoResult(
        table_path=table,
        loaded=tuple(f.path for f in to_load),
        skipped=skipped,
        rows_written=result.rows_written,
        version=result.version,
        load_id=load_id,
    )


@dataclass(frozen=True)
class IngestedFile:
    """One file a load took in: its path, size and modification time then, when the load ran
    (``seen_at``), the load's number (``batch_id``) and the table version holding its rows."""

    path: str
    size: int | None
    modification_time: dt.datetime | None
    seen_at: dt.datetime | None
    batch_id: int
    table_version: int | None


def copied_files(table_path: str | os.PathLike[str], *, store: DeltaTableStore) -> list[IngestedFile]:
    """The files COPY INTO loaded into the table, oldest load first (a file loaded again with
    ``force`` appears once per load). ``batch_id`` is the load's number and ``seen_at`` when
    it ran; ``size`` and ``modification_time`` are the file's at that time."""
    table = str(table_path)
    if not store.exists(table):
        return []
    committed = store.committed_batch(table, COPY_INTO_APP_ID)
    if committed is None:
        return []
    versions = {
        e.batch_id: e.version for e in store.history(table) if e.query == COPY_INTO_APP_ID and e.batch_id is not None
    }
    files: list[IngestedFile] = []
    for load_id, manifest in _manifests(table):
        if load_id > committed:
            continue  # written by a load that failed before its commit
        seen_at = dt.datetime.fromisoformat(manifest["createdAt"])
        for entry in manifest["files"]:
            files.append(
                IngestedFile(
                    path=entry["path"],
                    size=entry.get("size"),
                    modification_time=dt.datetime.fromisoformat(entry["modificationTime"])
                    if entry.get("modificationTime")
                    else None,
                    seen_at=seen_at,
                    batch_id=load_id,
                    table_version=versions.get(load_id),
                )
            )
    return files


def _write_manifest(table: str, load_id: int, files: list[LandedFile], *, source: str, force: bool) -> None:
    document = {
        "loadId": load_id,
        "source": source,
        "force": force,
        "createdAt": dt.datetime.now(dt.UTC).isoformat(),
        "files": [
            {"path": f.path, "size": f.size, "modificationTime": f.modification_time.isoformat()} for f in files
        ],
    }
    # Whole or not at all; replaces the manifest a failed attempt at the same load number may have left.
    (locate(table) / MANIFESTS_DIR / f"{load_id}.json").write_text(json.dumps(document, indent=1))


def _manifests(table: str) -> list[tuple[int, dict[str, Any]]]:
    folder = locate(table) / MANIFESTS_DIR
    found = []
    for name in folder.names():
        stem = name.removesuffix(".json")
        if not name.endswith(".json") or not stem.isdigit():
            continue
        try:
            found.append((int(stem), json.loads((folder / name).read_text())))
        except (OSError, ValueError) as exc:
            raise CopyIntoError(
                f"COPY INTO manifest {folder / name} of table {table} cannot be read ({exc}); without it the "
                "files it lists would be loaded again. Restore it, or full-refresh the table."
            ) from exc
    return sorted(found, key=lambda item: item[0])
