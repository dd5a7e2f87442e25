"""What a file ingestion has taken in, file by file: Auto Loader's ``cloud_files_state``, read
from the ``_source_file`` column of the tables it writes (with delta-rs, without Spark), never
from the query's checkpoint (Spark's private format). The two agree but for a landed file with
no record at all: it reads as unread, and a run finds nothing to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN
from lakehouse_assets.ingestion.files import LandedFile
from lakehouse_assets.ingestion.options import AutoLoaderOptions
from lakehouse_assets.location import Location, spark_file_uri
from lakehouse_assets.storage import DeltaTableStore


def ingested_files(store: DeltaTableStore, tables: Iterable[Location | str], *, version: int | None = None) -> set[str]:
    """The landed files (Spark's URIs, as ``_source_file`` spells them) whose records the
    ``tables`` hold (at their latest version, or at ``version``); a table not created yet, or
    without the column, holds none."""
    found: set[str] = set()
    for table in tables:
        path = str(table)
        if not store.exists(path):
            continue
        snapshot = store.snapshot(path, version=version)
        if SOURCE_FILE_COLUMN not in snapshot.column_names():
            continue
        column = snapshot.to_arrow([SOURCE_FILE_COLUMN]).column(0)
        found.update(value for value in pc.unique(column.cast(pa.string())).to_pylist() if value)
    return found


def unread_files(source_dir: Location | str, options: AutoLoaderOptions, ingested: set[str]) -> list[LandedFile]:
    """The data files in ``source_dir`` whose records no table holds (``ingested``, from
    :func:`ingested_files`): what the ingestion has yet to read."""
    return [f for f in options.landed_files(source_dir) if spark_file_uri(f.path) not in ingested]


def rewritten_files(source_dir: Location | str, options: AutoLoaderOptions, ingested: set[str],
                    store: DeltaTableStore, tables: Sequence[Location | str]) -> list[LandedFile]:
    """Landed files whose path the ingestion has taken in, modified after its newest commit:
    written again after they were ingested. The file source reads a path once, so their new
    content is not read. (A file written again between its own ingestion and the newest commit
    is not told apart: the tables record which file, not when it was modified.)"""
    newest = [entry.timestamp for table in tables if store.exists(str(table))
              for entry in store.history(str(table), limit=1)]
    if not newest:
        return []
    ingested_at = max(newest)
    return [f for f in options.landed_files(source_dir)
            if spark_file_uri(f.path) in ingested and f.modification_time > ingested_at]


def vanished_message(path: str, table: str) -> str:
    """The warning for a file that was listed before a run and is gone after it, its records
    not in ``table``: what was lost and what to do."""
    return (
        f"Skipped {path}: it was deleted after this run listed it and before it was read, so its "
        f"records are not in {table}. If that was a mistake, land it again under a new name."
    )
