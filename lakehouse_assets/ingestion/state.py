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
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow.fs as pafs

from lakehouse_assets.ingestion.errors import CheckpointStateError
from lakehouse_assets.ingestion.files import LandedFile, filesystem, is_data_file, list_data_files, spark_file_uri
from lakehouse_assets.ingestion.options import AutoLoaderOptions
from lakehouse_assets.storage import DeltaRsTableStore, TableStore

_LOG_NAME = re.compile(r"^(\d+)(\.compact)?$")


@dataclass(frozen=True)
class FileLogEntry:
    """A file the query's source assigned to a micro-batch."""

    path: str
    modification_time_ms: int
    batch_id: int


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


def file_source_log(checkpoint_location: str, *, source: int = 0) -> list[FileLogEntry]:
    """Every file the query's file source has assigned to a batch, in batch order."""
    fs, root = filesystem(checkpoint_location)
    folder = f"{root.rstrip('/')}/sources/{source}"
    logs: dict[int, bool] = {}
    for info in _list(fs, folder):
        match = _LOG_NAME.match(info.base_name)
        if match and info.type == pafs.FileType.File:
            batch = int(match.group(1))
            logs[batch] = logs.get(batch, False) or bool(match.group(2))
    compacted = [b for b, is_compact in logs.items() if is_compact]
    start = max(compacted) if compacted else None
    names = [f"{start}.compact"] if start is not None else []
    names += [str(b) for b in sorted(logs) if (start is None or b > start) and not logs[b]]
    entries: dict[str, FileLogEntry] = {}
    for name in names:
        for entry in _read_log(fs, f"{folder}/{name}"):
            entries.setdefault(entry.path, entry)
    return sorted(entries.values(), key=lambda e: (e.batch_id, e.path))


def last_committed_batch(checkpoint_location: str) -> int | None:
    """The newest batch the query finished, or None."""
    fs, root = filesystem(checkpoint_location)
    done = [int(i.base_name) for i in _list(fs, f"{root.rstrip('/')}/commits") if i.base_name.isdigit()]
    return max(done) if done else None


def uncommitted_files(checkpoint_location: str) -> list[str]:
    """Files assigned to batches the query has not finished: a failed batch's files, which a
    restarted query reads again."""
    done = last_committed_batch(checkpoint_location)
    return [e.path for e in file_source_log(checkpoint_location) if done is None or e.batch_id > done]


def unread_files(source_dir: str, checkpoint_location: str, options: AutoLoaderOptions) -> list[LandedFile]:
    """The data files in ``source_dir`` that the query has not ingested yet: never assigned to
    a batch, or assigned to one that did not finish. Found from a listing and the query's file
    log, without starting Spark (to skip a run with nothing to do, or to plan a read)."""
    done = last_committed_batch(checkpoint_location)
    taken = (
        {spark_file_uri(e.path) for e in file_source_log(checkpoint_location) if e.batch_id <= done}
        if done is not None
        else set()
    )
    recursive = options.reader_options.get("recursiveFileLookup", "false").lower() == "true"
    landed = list_data_files(source_dir, recursive=recursive, path_glob_filter=options.path_glob_filter)
    return [f for f in landed if f.path not in taken]


def relanded_files(source_dir: str, checkpoint_location: str, options: AutoLoaderOptions) -> list[LandedFile]:
    """Landed files whose path the query has ingested, but which were written again since
    (another modification time): the source reads a path once, so their new content is not
    read. Found from a listing and the query's file log."""
    done = last_committed_batch(checkpoint_location)
    if done is None:
        return []
    seen = {spark_file_uri(e.path): e.modification_time_ms for e in file_source_log(checkpoint_location) if e.batch_id <= done}
    recursive = options.reader_options.get("recursiveFileLookup", "false").lower() == "true"
    landed = list_data_files(source_dir, recursive=recursive, path_glob_filter=options.path_glob_filter)
    return [
        f for f in landed
        if f.path in seen and abs(int(f.modification_time.timestamp() * 1000) - seen[f.path]) >= 1
    ]


def vanished_files(checkpoint_location: str, *, after_batch: int | None) -> list[str]:
    """Files the query assigned to batches after ``after_batch`` that no longer exist: deleted
    between the listing and the read, they were skipped, with their records."""
    entries = [e for e in file_source_log(checkpoint_location) if after_batch is None or e.batch_id > after_batch]
    gone = []
    for entry in entries:
        fs, local = filesystem(entry.path)
        if fs.get_file_info(local).type == pafs.FileType.NotFound:
            gone.append(spark_file_uri(entry.path))
    return gone


def vanished_message(path: str, table: str) -> str:
    """The warning for a file :func:`vanished_files` found: what was lost and what to do."""
    return (
        f"Skipped {path}: it was deleted after this run listed it and before it was read, so its "
        f"records are not in {table}. If that was a mistake, land it again under a new name."
    )


def query_id(checkpoint_location: str) -> str | None:
    """The query's id from ``<checkpoint>/metadata``, or None before its first start."""
    fs, root = filesystem(checkpoint_location)
    try:
        with fs.open_input_stream(f"{root.rstrip('/')}/metadata") as stream:
            return str(json.loads(stream.read().decode("utf-8"))["id"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointStateError(
            f"Checkpoint {checkpoint_location} has an unreadable metadata file ({exc}); "
            "it is damaged: restore it or full-refresh the table."
        ) from exc


def batch_start_times(checkpoint_location: str) -> dict[int, dt.datetime]:
    """When each batch still in the offset log started (Spark keeps the last 100 or so)."""
    fs, root = filesystem(checkpoint_location)
    folder = f"{root.rstrip('/')}/offsets"
    times = {}
    for info in _list(fs, folder):
        if not info.base_name.isdigit():
            continue
        try:
            with fs.open_input_stream(info.path) as stream:
                lines = stream.read().decode("utf-8").splitlines()
            millis = json.loads(lines[1])["batchTimestampMs"]
        except (OSError, ValueError, KeyError, IndexError):
            continue  # being written, or from another Spark version: the time is unknown
        times[int(info.base_name)] = dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc)
    return times


def ingested_files(
    checkpoint_location: str,
    *,
    table_path: str | None = None,
    store: TableStore | None = None,
) -> list[IngestedFile]:
    """The files an ingestion query has taken in, oldest batch first: path, size, modification
    time, when it was seen, its batch, and (given ``table_path``) the table version holding its
    rows. The paths are spelt as the bronze ``_source_file`` column spells them."""
    entries = [e for e in file_source_log(checkpoint_location) if is_data_file(e.path.rsplit("/", 1)[-1])]
    done = last_committed_batch(checkpoint_location)
    started = batch_start_times(checkpoint_location)
    versions: dict[int, int] = {}
    commit_times: dict[int, dt.datetime] = {}
    if table_path is not None:
        store = store or DeltaRsTableStore()
        query = query_id(checkpoint_location)
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
            modification_time=dt.datetime.fromtimestamp(e.modification_time_ms / 1000, dt.timezone.utc),
            seen_at=started.get(e.batch_id) or commit_times.get(e.batch_id),
            batch_id=e.batch_id,
            table_version=versions.get(e.batch_id),
            committed=done is not None and e.batch_id <= done,
        )
        for e in entries
    ]


def _read_log(fs: pafs.FileSystem, path: str) -> Iterable[FileLogEntry]:
    try:
        with fs.open_input_stream(path) as stream:
            lines = stream.read().decode("utf-8").splitlines()
    except OSError as exc:
        raise CheckpointStateError(f"Cannot read the file source log {path}: {exc}") from exc
    if not lines or not lines[0].startswith("v"):
        raise CheckpointStateError(
            f"{path} is not a Spark file source log (it should start with a version line such as v1)"
        )
    for line in lines[1:]:
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            yield FileLogEntry(str(doc["path"]), int(doc["timestamp"]), int(doc["batchId"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointStateError(f"Unreadable entry in the file source log {path}: {line[:200]!r}") from exc


def _list(fs: pafs.FileSystem, folder: str) -> list[pafs.FileInfo]:
    if fs.get_file_info(folder).type != pafs.FileType.Directory:
        return []
    return fs.get_file_info(pafs.FileSelector(folder, recursive=False))


def _sizes(paths: Iterable[str]) -> dict[str, int]:
    by_fs: dict[str, int] = {}
    for path in paths:
        fs, local = filesystem(path)
        info = fs.get_file_info(local)
        if info.type == pafs.FileType.File:
            by_fs[path] = int(info.size or 0)
    return by_fs
