"""Spark writes a commit's data files into a fresh folder of the table before delta-rs
commits them: until the commit, no reader sees them, and a write killed on the way leaves
only folders that a retry (or a table not created yet) can recognise and ignore.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from dataclasses import dataclass

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from lakehouse_assets.storage._files import Location, locate
from lakehouse_assets.storage._parquet_stats import stats_json

# Folders stage_files writes data files into: <UTC time>-<12 hex digits>.
_STAGING_FOLDER = re.compile(r"\d{8}T\d{6}-[0-9a-f]{12}")


@dataclass(frozen=True)
class StagedFile:
    """A data file written for a commit, with what its add action records."""

    relative_path: str
    size: int
    modification_time_ms: int
    num_rows: int
    stats: str


def stage_files(df: DataFrame, path: str, *, under: str | None = None) -> list[StagedFile]:
    """Write the data files with Spark's Parquet writer into a fresh folder of the table at
    ``path`` (inside its folder ``under``, such as ``_change_data``, when given); the files
    with rows, their statistics taken from the Parquet footers."""
    folder = f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}"
    if under:
        folder = f"{under}/{folder}"
    table = locate(path)
    staged_dir = table.child(folder)
    try:
        df.write.mode("error").parquet(f"{path.rstrip('/')}/{folder}")
    except BaseException:
        # A failed job leaves the folder (and sometimes finished task files) behind. They
        # are invisible to readers, but in a table not created yet they would make the
        # retry refuse the path as "not a Delta table".
        _delete_quietly(staged_dir)
        raise
    staged = []
    for info in table.fs.get_file_info(pafs.FileSelector(staged_dir.path, recursive=True)):
        name = info.base_name
        if info.type != pafs.FileType.File or not name.endswith(".parquet") or name.startswith((".", "_")):
            continue
        footer = pq.read_metadata(info.path, filesystem=table.fs)
        relative = info.path[len(table.path.rstrip("/")) + 1 :]
        staged.append(
            StagedFile(
                relative_path=relative,
                size=info.size,
                modification_time_ms=int(info.mtime.timestamp() * 1000),
                num_rows=footer.num_rows,
                stats=stats_json(footer),
            )
        )
    empty = [f for f in staged if f.num_rows == 0]
    for f in empty:
        table.fs.delete_file(table.child(f.relative_path).path)
    _remove_checksum_files(staged_dir)
    return [f for f in staged if f.num_rows > 0]


def holds_only_staging_folders(location: Location) -> bool:
    """Whether a folder without a Delta log holds nothing but data folders of writes that
    were killed before their first commit (named as :func:`stage_files` names them). No
    reader ever sees those files, so the path is still free for a new table."""
    entries = location.fs.get_file_info(pafs.FileSelector(location.path, recursive=False))
    return bool(entries) and all(
        e.type == pafs.FileType.Directory and _STAGING_FOLDER.fullmatch(e.base_name) for e in entries
    )


def _delete_quietly(folder: Location) -> None:
    try:
        if folder.exists():
            folder.fs.delete_dir(folder.path)
    except OSError:
        pass  # best effort: files outside the log are never read


def _remove_checksum_files(folder: Location) -> None:
    """Hadoop's local file system leaves ``.crc`` files beside data files; they are not
    part of the table."""
    if not isinstance(folder.fs, pafs.LocalFileSystem):
        return
    for info in folder.fs.get_file_info(pafs.FileSelector(folder.path, recursive=True)):
        if info.type == pafs.FileType.File and info.base_name.endswith(".crc"):
            folder.fs.delete_file(info.path)
