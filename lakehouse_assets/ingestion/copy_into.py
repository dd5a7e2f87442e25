"""COPY INTO: an idempotent batch load of the files in a folder into a Delta table.

``COPY INTO t FROM 'folder' FILEFORMAT = CSV PATTERN = '*.csv'`` loads the files it has not
loaded before and skips the others; ``force`` loads them again. The memory of loaded files
is kept in the table folder, so it travels with the table (and a full refresh, which drops
the folder, forgets it):

- before a load commits, the files it loads are written to ``<table>/_copy_into/<n>.json``;
- the load's Delta commit records the app transaction (``lakehouse.copy_into``, ``n``);
- a manifest counts only when the table's transaction for ``lakehouse.copy_into`` has reached
  its number, so a load that failed before its commit is not remembered and its files are
  loaded again next time.

The commit is the only point where a load becomes real, as for a streaming micro-batch. Unlike
commit metadata, the manifests survive Delta log cleanup; Delta readers and vacuum ignore
folders whose names start with ``_``. Run one COPY INTO per table at a time.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from lakehouse_assets.ingestion.errors import CopyIntoError, IngestionOptionsError
from lakehouse_assets.ingestion.files import LandedFile, glob_matches, list_data_files
from lakehouse_assets.ingestion.options import SourceFormat
from lakehouse_assets.location import local_path
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

    ``pattern`` is a glob over the paths relative to ``source`` (``"*.csv"``,
    ``"2024-*/part-{1,2}.json"``). ``force`` loads matching files again even if they were
    loaded before. ``merge_schema`` lets the files add columns to the table; without it new
    columns are an error naming them. ``format_options`` go to Spark's reader
    (``{"header": "true", "inferSchema": "true"}`` for CSV). The table is created by the first
    load. Files are recognised by path: a file rewritten under a loaded name is skipped
    unless ``force``. ``store`` is the lakehouse's (its resource's).
    A load that writes no rows (its files are all empty) commits nothing, so
    it is not remembered: such files are listed as loaded again, with no rows, next time.
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
    committed: bool


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
                    committed=True,
                )
            )
    return files


def _manifest_folder(table: str) -> Path:
    if "://" in table and not table.startswith("file:"):
        raise CopyIntoError(f"COPY INTO keeps its manifests on the local file system; {table} is not local")
    return Path(local_path(table)) / MANIFESTS_DIR


def _write_manifest(table: str, load_id: int, files: list[LandedFile], *, source: str, force: bool) -> None:
    folder = _manifest_folder(table)
    folder.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {
        "loadId": load_id,
        "source": source,
        "force": force,
        "createdAt": dt.datetime.now(dt.UTC).isoformat(),
        "files": [
            {"path": f.path, "size": f.size, "modificationTime": f.modification_time.isoformat()} for f in files
        ],
    }
    # Replaces the manifest a failed attempt at the same load number may have left.
    fd, temp = tempfile.mkstemp(prefix=f".{load_id}.", suffix=".tmp", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1)
    os.replace(temp, folder / f"{load_id}.json")


def _manifests(table: str) -> list[tuple[int, dict[str, Any]]]:
    folder = _manifest_folder(table)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        stem = path.name.removesuffix(".json")
        if not path.name.endswith(".json") or not stem.isdigit():
            continue
        try:
            found.append((int(stem), json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError) as exc:
            raise CopyIntoError(
                f"COPY INTO manifest {path} of table {table} cannot be read ({exc}); without it the "
                "files it lists would be loaded again. Restore it, or full-refresh the table."
            ) from exc
    return sorted(found, key=lambda item: item[0])
