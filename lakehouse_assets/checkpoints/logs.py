"""Spark's checkpoint log files: read and checked as Spark reads them on restart, and written
again by ``lakehouse repair``. With :mod:`~lakehouse_assets.checkpoints.delta_offsets`, the only
code that reads Spark's or Delta's own on-disk formats (``docs/reliability.md`` says what and
why no public interface serves); each format is checked for the version written for.

A checkpoint holds ``metadata`` (the query id), ``offsets/N`` (what batch N reads, logged
before it runs), ``commits/N`` (batch N is done), ``state/`` (operator state) and, for a file
source, ``sources/<i>/N`` and ``N.compact`` (the files each batch read), each log ``v1``.
Each reader raises :class:`~lakehouse_assets.errors.CorruptCheckpointError` naming the
checkpoint, the file and what is wrong with it, where Spark would fail with a stack trace.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pyarrow.fs as pafs

from lakehouse_assets.errors import CorruptCheckpointError
from lakehouse_assets.location import Location, locate

# Log format versions this module (and Spark 4.x) reads: "v1" in offsets, commits, sources.
_VERSION_LINE = re.compile(r"v(\d+)")
# Spark reads the latest offsets file and the one before it (the previous batch's end).
_OFFSET_FILES_SPARK_READS = 2
# A file source's log: one file per batch, and every 10 batches a compacted one.
_SOURCE_LOG_NAME = re.compile(r"^(\d+)(\.compact)?$")
_SUPPORTED_LOG_VERSION = 1


@dataclass(frozen=True)
class CheckpointState:
    """What a checkpoint says about its query: its id and the last planned and done batches."""

    location: str
    query_id: str | None  # from <checkpoint>/metadata
    last_planned_batch: int | None  # highest N with <checkpoint>/offsets/N
    last_committed_batch: int | None  # highest N with <checkpoint>/commits/N
    # The source offsets logged for the last planned batch, one per source (parsed JSON;
    # None for a source without an offset), in the order Spark numbers the sources.
    source_offsets: tuple[Any, ...] = field(default=())

    @property
    def pending_batch(self) -> int | None:
        """A batch planned but never committed: the query stopped or failed during it, and
        its next run redoes it first."""
        if self.last_planned_batch is None:
            return None
        if self.last_committed_batch is None or self.last_planned_batch > self.last_committed_batch:
            return self.last_planned_batch
        return None


def read_state(location: str, table_name: str | None = None) -> CheckpointState | None:
    """The state of the checkpoint at ``location``; None when there is no checkpoint yet.

    Every file Spark reads to restart the query is checked (its format and, where Hadoop
    wrote a ``.crc`` beside it, its checksum). A damaged one raises
    :class:`~lakehouse_assets.errors.CorruptCheckpointError` naming the file and the
    recovery; ``table_name`` (``layer.name``) names the table in that advice, and defaults
    to the last two parts of ``location`` (``_checkpoints/<layer>/<name>``).
    """
    checkpoint = locate(str(location))
    name = table_name or table_name_of(str(location))
    if checkpoint.is_empty_or_missing():
        return None
    planned = batch_ids(checkpoint / "offsets")
    committed = batch_ids(checkpoint / "commits")
    metadata = checkpoint / "metadata"
    if not metadata.exists():
        if not planned and not committed:
            return None  # the query never got as far as starting: nothing to resume
        corrupt(location, metadata, "is missing", name)
    query_id = _read_query_id(str(location), metadata, name)
    offsets: tuple[Any, ...] = ()
    for batch in planned[-_OFFSET_FILES_SPARK_READS:]:
        _, offsets = _read_offsets(str(location), checkpoint / "offsets" / str(batch), name)
    if committed:
        read_log(str(location), checkpoint / "commits" / str(committed[-1]), name, body_lines=1)
        if not planned or committed[-1] > planned[-1]:
            corrupt(location, checkpoint / "commits" / str(committed[-1]),
                     f"marks batch {committed[-1]} done, but offsets/{committed[-1]} (what it read) is missing", name)
    sources = checkpoint / "sources"
    if sources.exists():  # every file source's log Spark reads on restart, each entry parsed
        for source in sources.fs.get_file_info(pafs.FileSelector(sources.path, recursive=False)):
            if source.type == pafs.FileType.Directory and source.base_name.isdigit():
                read_file_source_log(str(location), int(source.base_name), name)
    return CheckpointState(
        location=str(location),
        query_id=query_id,
        last_planned_batch=planned[-1] if planned else None,
        last_committed_batch=committed[-1] if committed else None,
        source_offsets=offsets,
    )


def table_name_of(location: str) -> str:
    """``layer.name`` from a checkpoint path ``.../_checkpoints/<layer>/<name>``."""
    parts = str(location).rstrip("/").split("/")
    return ".".join(parts[-2:]) if len(parts) >= 2 else str(location)


def batch_ids(folder: Location) -> list[int]:
    """The batch numbers of a checkpoint log folder (``offsets``, ``commits``), ascending.
    Spark's temporary files (``.N.<uuid>.tmp``) and checksums are not batches."""
    if not folder.exists():
        return []
    return sorted(
        int(info.base_name)
        for info in folder.fs.get_file_info(pafs.FileSelector(folder.path, recursive=False))
        if info.type == pafs.FileType.File and info.base_name.isdigit()
    )


def read_query_id(location: str, table_name: str | None = None) -> str | None:
    """The id of the query whose checkpoint is at ``location``, or None before its first start."""
    metadata = locate(str(location)) / "metadata"
    return _read_query_id(str(location), metadata, table_name) if metadata.exists() else None


def _read_query_id(location: str, metadata: Location, name: str | None) -> str:
    text = read_checked(location, metadata, name)
    try:
        query_id = json.loads(text)["id"]
    except (ValueError, KeyError, TypeError):
        corrupt(location, metadata, "does not hold the query id as JSON ({\"id\": ...})", name)
    if not isinstance(query_id, str) or not query_id:
        corrupt(location, metadata, "holds no query id", name)
    return query_id


def _read_offsets(location: str, file: Location, name: str | None) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """An ``offsets/N`` file: the batch's metadata line, and one offset per source."""
    lines = read_log(location, file, name, body_lines=1)
    sources = lines[2:]
    if not sources:
        corrupt(location, file, "is truncated: it names no source offset", name)
    offsets: list[Any] = []
    for line in sources:
        if line == "-":
            offsets.append(None)
            continue
        try:
            offsets.append(json.loads(line))
        except ValueError:
            corrupt(location, file, f"has a source offset that is not JSON ({line[:80]!r})", name)
    return json.loads(lines[1]), tuple(offsets)


def read_log(location: str, file: Location, name: str | None, *, body_lines: int) -> list[str]:
    """A ``v1`` log file's lines, checked: the version line, then ``body_lines`` JSON objects."""
    lines = read_checked(location, file, name).split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    version = _VERSION_LINE.fullmatch(lines[0]) if lines else None
    if version is None:
        corrupt(location, file, "does not start with a log version line (v1): it is empty or garbled", name)
    if int(version.group(1)) > _SUPPORTED_LOG_VERSION:
        corrupt(location, file, f"has log version {lines[0]}, newer than this Spark reads", name)
    if len(lines) < 1 + body_lines:
        corrupt(location, file, "is truncated", name)
    for line in lines[1 : 1 + body_lines]:
        try:
            parsed = json.loads(line)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            corrupt(location, file, f"has a garbled line ({line[:80]!r})", name)
    return lines


def read_checked(location: str, file: Location, name: str | None) -> str:
    """The file's text; a checksum Hadoop wrote beside it (``.<name>.crc``) must match,
    since Spark refuses the file otherwise."""
    try:
        with file.fs.open_input_stream(file.path) as stream:
            data = stream.read()
    except FileNotFoundError:
        corrupt(location, file, "is missing", name)
    except OSError as exc:
        corrupt(location, file, f"cannot be read ({exc})", name)
    crc = file.parent / f".{file.name}.crc"
    if file.is_local and crc.exists():
        with crc.fs.open_input_stream(crc.path) as stream:
            if not _crc_matches(data, stream.read()):
                corrupt(location, file,
                        f"does not match its checksum file {crc.path} (it was changed or cut short)", name)
    try:
        return str(data.decode("utf-8"))
    except UnicodeDecodeError:
        corrupt(location, file, "is not UTF-8 text (garbled)", name)


def _crc_matches(data: bytes, crc: bytes) -> bool:
    """Whether ``data`` matches a Hadoop ``.crc`` file: ``crc\\0``, the bytes per checksum
    (big-endian int), then one big-endian CRC-32 per chunk."""
    if len(crc) < 8 or crc[:4] != b"crc\x00":
        return False
    chunk = struct.unpack(">i", crc[4:8])[0]
    if chunk <= 0:
        return False
    sums = crc[8:]
    expected = [zlib.crc32(data[i : i + chunk]) for i in range(0, len(data), chunk)]
    return len(sums) == 4 * len(expected) and all(
        struct.unpack(">I", sums[4 * i : 4 * i + 4])[0] == value for i, value in enumerate(expected)
    )


def corrupt(location: str, file: Location, problem: str, name: str | None) -> NoReturn:
    raise CorruptCheckpointError(str(location), file.path, problem, name)


@dataclass(frozen=True)
class FileLogEntry:
    """A file the query's file source assigned to a micro-batch (``sources/<i>/<batch>``)."""

    path: str
    modification_time_ms: int
    batch_id: int


def read_file_source_log(location: str, source: int, name: str | None) -> list[FileLogEntry]:
    """Every file a file source assigned to a batch, once each, by batch then path: the
    latest compacted log (``N.compact``, all files up to batch N) and the batches after it."""
    folder = locate(str(location)) / "sources" / str(source)
    if not folder.exists():
        return []
    logs: dict[int, bool] = {}
    for info in folder.fs.get_file_info(pafs.FileSelector(folder.path, recursive=False)):
        match = _SOURCE_LOG_NAME.match(info.base_name)
        if match and info.type == pafs.FileType.File:
            batch = int(match.group(1))
            logs[batch] = logs.get(batch, False) or bool(match.group(2))
    compacted = [b for b, is_compact in logs.items() if is_compact]
    start = max(compacted) if compacted else None
    names = [f"{start}.compact"] if start is not None else []
    names += [str(b) for b in sorted(logs) if (start is None or b > start) and not logs[b]]
    entries: dict[str, FileLogEntry] = {}
    for file_name in names:
        file = folder / file_name
        for line in read_log(location, file, name, body_lines=0)[1:]:
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                entry = FileLogEntry(str(doc["path"]), int(doc["timestamp"]), int(doc["batchId"]))
            except (ValueError, KeyError, TypeError):
                corrupt(location, file, f"has a garbled file entry ({line[:80]!r})", name)
            entries.setdefault(entry.path, entry)
    return sorted(entries.values(), key=lambda e: (e.batch_id, e.path))


def batch_start_times(location: str) -> dict[int, dt.datetime]:
    """When each batch still in the offset log started (Spark keeps the last 100 or so); a
    file being written, or from another Spark version, has no known time."""
    logged = {batch: read_batch_offsets(location, batch) for batch in planned_batches(location)}
    return {batch: dt.datetime.fromtimestamp(offsets.timestamp_ms / 1000, dt.UTC)
            for batch, offsets in logged.items() if offsets is not None and offsets.timestamp_ms}


@dataclass(frozen=True)
class BatchOffsets:
    """What Spark logged in ``offsets/N`` before running batch N: the batch's watermark and
    timestamp (``current_timestamp()`` in the batch) and where each source ends.

    The exactly-once sink records it in the batch's Delta commit, so a checkpoint can be
    rebuilt from the table (:mod:`lakehouse_assets.checkpoints.repair`).
    """

    watermark_ms: int
    timestamp_ms: int
    sources: tuple[Any, ...]  # parsed JSON per source; None for a source without an offset
    conf: dict[str, str] = field(default_factory=dict, compare=False)

    def to_json(self) -> str:
        """The compact form stored in a commit (the session settings are left out)."""
        return json.dumps(
            {"batchWatermarkMs": self.watermark_ms, "batchTimestampMs": self.timestamp_ms,
             "sources": list(self.sources)},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> BatchOffsets:
        data = json.loads(text)
        return cls(int(data["batchWatermarkMs"]), int(data["batchTimestampMs"]), tuple(data["sources"]))

    def log_text(self, conf: dict[str, str] | None = None) -> str:
        """The text of an ``offsets/N`` file, as Spark writes it."""
        metadata = {"batchWatermarkMs": self.watermark_ms, "batchTimestampMs": self.timestamp_ms,
                    "conf": conf if conf is not None else self.conf}
        lines = ["v1", json.dumps(metadata, separators=(",", ":"))]
        lines += ["-" if s is None else json.dumps(s, separators=(",", ":")) for s in self.sources]
        return "\n".join(lines)


def read_batch_offsets(location: str, batch_id: int) -> BatchOffsets | None:
    """What Spark logged for batch ``batch_id`` in the checkpoint at ``location``, or None
    when the file is missing or unreadable."""
    file = locate(str(location)) / "offsets" / str(batch_id)
    try:
        metadata, sources = _read_offsets(str(location), file, None)
        return BatchOffsets(
            int(metadata.get("batchWatermarkMs", 0)), int(metadata.get("batchTimestampMs", 0)),
            sources, dict(metadata.get("conf") or {}),
        )
    except (CorruptCheckpointError, OSError, ValueError, TypeError):
        return None


def planned_batches(location: str) -> list[int]:
    """The batches the checkpoint at ``location`` planned (``offsets/N``), ascending."""
    return batch_ids(locate(str(location)) / "offsets")


def committed_batches(location: str) -> list[int]:
    """The batches the checkpoint at ``location`` marked done (``commits/N``), ascending."""
    return batch_ids(locate(str(location)) / "commits")


def keeps_state(location: str) -> bool:
    """Whether the query keeps operator state (windows, a watermark) in its checkpoint."""
    return Path(location, "state").is_dir()


# -- writing a checkpoint (lakehouse repair) ----------------------------------------------------
#: The file source's offset of a rebuilt log: its one entry, at log position 0.
FILE_SOURCE_START: tuple[Any, ...] = ({"logOffset": 0},)


def reads_files(offsets: BatchOffsets) -> bool:
    """Whether the batch's one source is a file source (its offset is a file log position)."""
    sources = offsets.sources
    return len(sources) == 1 and isinstance(sources[0], dict) and set(sources[0]) == {"logOffset"}


def file_log_entry(source_file: str, modification_time_ms: int) -> dict[str, Any]:
    """A file source's log entry for a landed file, as Spark spells it (``file:///abs``,
    where rows spell it ``file:/abs``), assigned to batch 0."""
    uri = source_file
    if uri.startswith("file:/") and not uri.startswith("file://"):
        uri = "file://" + uri[len("file:"):]
    elif uri.startswith("/"):
        uri = "file://" + uri
    return {"path": uri, "timestamp": modification_time_ms, "batchId": 0}


def write_checkpoint(folder: Path, query_id: str, offsets: Mapping[int, BatchOffsets], conf: dict[str, str], *,
                     done: int, files: list[dict[str, Any]] | None) -> None:
    """Write a checkpoint of query ``query_id`` into the new ``folder``: the ``offsets`` of
    each batch, batch ``done`` marked done, and (for a file source) ``files`` as its log."""
    (folder / "offsets").mkdir(parents=True)
    (folder / "commits").mkdir()
    (folder / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    for batch, recorded in sorted(offsets.items()):
        (folder / "offsets" / str(batch)).write_text(recorded.log_text(conf))
    (folder / "commits" / str(done)).write_text(f'v1\n{{"nextBatchWatermarkMs":{offsets[done].watermark_ms:d}}}')
    if files is not None:
        (folder / "sources" / "0").mkdir(parents=True)
        lines = ["v1", *(json.dumps(entry, separators=(",", ":")) for entry in files)]
        (folder / "sources" / "0" / "0").write_text("\n".join(lines))
