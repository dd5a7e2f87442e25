"""What a file ingestion query has taken in, file by file: Auto Loader's ``cloud_files_state``.

Spark's file source writes every file it assigns to a micro-batch to its log,
``<checkpoint>/sources/0/<batch id>``, before the batch runs: a ``v1`` line, then one JSON line
per file (``path``, ``timestamp`` = modification time, ``batchId``). Every 10 batches the log
is compacted into ``<batch id>.compact``, which holds all files up to that batch. A batch is
done once ``<checkpoint>/commits/<batch id>`` exists, and the Delta sink records the query id
and batch id in the commit that wrote it, so the table's history says which version holds
each batch.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow.fs as pafs

from lakehouse_assets.checkpoints.checkpoint import Checkpoint
from lakehouse_assets.ingestion.files import LandedFile, is_data_file
from lakehouse_assets.ingestion.options import AutoLoaderOptions
from lakehouse_assets.location import locate, spark_file_uri
from lakehouse_assets.storage import DeltaTableStore


@dataclass(frozen=True)
class IngestedFile:
    """One file a query took in.

    ``seen_at`` is when the micro-batch that took the file started; ``committed`` says whether
    that batch finished; ``table_version`` is the table version holding its rows (None when the
    batch wrote no rows, or has not been committed). ``size`` is the file's size now (None if it
    has been removed since).
    """

    path: str
    size: int | None
    modification_time: dt.datetime | None
    seen_at: dt.datetime | None
    batch_id: int
    table_version: int | None
    committed: bool


def uncommitted_files(checkpoint_location: str) -> list[str]:
    """Files assigned to batches the query has not finished: a failed batch's files, which a
    restarted query reads again."""
    checkpoint = Checkpoint(checkpoint_location)
    done = checkpoint.last_committed_batch()
    return [e.path for e in checkpoint.file_source_log() if done is None or e.batch_id > done]


def unread_files(source_dir: str, checkpoint_location: str, options: AutoLoaderOptions) -> list[LandedFile]:
    """The data files in ``source_dir`` that the query has not ingested yet: never assigned to
    a batch, or assigned to one that did not finish. Found from a listing and the query's file
    log, without starting Spark (to skip a run with nothing to do, or to plan a read)."""
    checkpoint = Checkpoint(checkpoint_location)
    done = checkpoint.last_committed_batch()
    taken = (
        {spark_file_uri(e.path) for e in checkpoint.file_source_log() if e.batch_id <= done}
        if done is not None
        else set()
    )
    landed = options.landed_files(source_dir)
    return [f for f in landed if f.path not in taken]


def relanded_files(source_dir: str, checkpoint_location: str, options: AutoLoaderOptions) -> list[LandedFile]:
    """Landed files whose path the query has ingested, but which were written again since
    (another modification time): the source reads a path once, so their new content is not
    read. Found from a listing and the query's file log."""
    checkpoint = Checkpoint(checkpoint_location)
    done = checkpoint.last_committed_batch()
    if done is None:
        return []
    seen = {
        spark_file_uri(e.path): e.modification_time_ms
        for e in checkpoint.file_source_log()
        if e.batch_id <= done
    }
    landed = options.landed_files(source_dir)
    return [
        f for f in landed
        if f.path in seen and abs(int(f.modification_time.timestamp() * 1000) - seen[f.path]) >= 1
    ]


def vanished_files(checkpoint_location: str, *, after_batch: int | None) -> list[str]:
    """Files the query assigned to batches after ``after_batch`` that no longer exist: deleted
    between the listing and the read, they were skipped, with their records."""
    log = Checkpoint(checkpoint_location).file_source_log()
    entries = [e for e in log if after_batch is None or e.batch_id > after_batch]
    gone = []
    for entry in entries:
        if not locate(entry.path).exists():
            gone.append(spark_file_uri(entry.path))
    return gone


def vanished_message(path: str, table: str) -> str:
    """The warning for a file :func:`vanished_files` found: what was lost and what to do."""
    return (
        f"Skipped {path}: it was deleted after this run listed it and before it was read, so its "
        f"records are not in {table}. If that was a mistake, land it again under a new name."
    )


def ingested_files(
    checkpoint_location: str,
    *,
    table_path: str | None = None,
    store: DeltaTableStore | None = None,
) -> list[IngestedFile]:
    """The files an ingestion query has taken in, oldest batch first: path, size, modification
    time, when it was seen, its batch, and (given ``table_path`` and its ``store``) the table
    version holding its rows. The paths are spelt as the bronze ``_source_file`` column spells them."""
    checkpoint = Checkpoint(checkpoint_location)
    entries = [e for e in checkpoint.file_source_log() if is_data_file(e.path.rsplit("/", 1)[-1])]
    done = checkpoint.last_committed_batch()
    started = checkpoint.batch_start_times()
    versions: dict[int, int] = {}
    commit_times: dict[int, dt.datetime] = {}
    if table_path is not None and store is not None:
        query = checkpoint.query_id()
        if query is not None and store.exists(table_path):
            for entry in store.history(table_path):
                if entry.query == query and entry.batch_id is not None:
                    versions.setdefault(entry.batch_id, entry.version)
                    commit_times.setdefault(entry.batch_id, entry.timestamp)
    sizes = _sizes(e.path for e in entries)
    return [
        IngestedFile(
            path=spark_file_uri(e.path),
            size=sizes.get(e.path),
            modification_time=dt.datetime.fromtimestamp(e.modification_time_ms / 1000, dt.UTC),
            seen_at=started.get(e.batch_id) or commit_times.get(e.batch_id),
            batch_id=e.batch_id,
            table_version=versions.get(e.batch_id),
            committed=done is not None and e.batch_id <= done,
        )
        for e in entries
    ]


def _sizes(paths: Iterable[str]) -> dict[str, int]:
    by_fs: dict[str, int] = {}
    for path in paths:
        file = locate(path)
        info = file.fs.get_file_info(file.path)
        if info.type == pafs.FileType.File:
            by_fs[path] = int(info.size or 0)
    return by_fs
