"""Reading a Structured Streaming checkpoint, and checking it against the table it feeds.

A checkpoint (Spark 4.x layout) holds ``metadata`` (the query id), ``offsets/N`` (what
batch N reads, logged before it runs), ``commits/N`` (batch N is done) and, for file
sources, ``sources/<i>/N`` (the files each batch read). Every commit the exactly-once sink
makes records ``(query id, batch id)`` as a Delta app transaction, so the table says which
batch of which query it holds last; the checkpoint must agree, or a restarted query would
skip batches the table never received (checkpoint ahead) or skip new batches as if already
written (checkpoint behind). Spark itself checks neither, and reports a damaged file with a
stack trace; here both stop the run with an error that names the checkpoint and the way out.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pyarrow.fs as pafs

from lakehouse_assets.errors import CheckpointMismatchError, CorruptCheckpointError, SourceRecreatedError
from lakehouse_assets.storage._files import Location, locate
from lakehouse_assets.storage.engine import TableStore

# Log format versions this module (and Spark 4.x) reads: "v1" in offsets, commits, sources.
_VERSION_LINE = re.compile(r"v(\d+)")
_SUPPORTED_LOG_VERSION = 1
# Spark reads the latest offsets file and the one before it (the previous batch's end).
_OFFSET_FILES_SPARK_READS = 2


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


def read_checkpoint(location: str, table_name: str | None = None) -> CheckpointState | None:
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
    planned = batch_ids(checkpoint.child("offsets"))
    committed = batch_ids(checkpoint.child("commits"))
    metadata = checkpoint.child("metadata")
    if not metadata.exists():
        if not planned and not committed:
            return None  # the query never got as far as starting: nothing to resume
        _corrupt(location, metadata, "is missing", name)
    query_id = _query_id(str(location), metadata, name)
    offsets: tuple[Any, ...] = ()
    for batch in planned[-_OFFSET_FILES_SPARK_READS:]:
        offsets = _read_offsets(str(location), checkpoint.child("offsets", str(batch)), name)
    if committed:
        _read_log(str(location), checkpoint.child("commits", str(committed[-1])), name, body_lines=1)
        if not planned or committed[-1] > planned[-1]:
            _corrupt(location, checkpoint.child("commits", str(committed[-1])),
                     f"marks batch {committed[-1]} done, but offsets/{committed[-1]} (what it read) is missing", name)
    _check_source_logs(str(location), checkpoint, name)
    return CheckpointState(
        location=str(location),
        query_id=query_id,
        last_planned_batch=planned[-1] if planned else None,
        last_committed_batch=committed[-1] if committed else None,
        source_offsets=offsets,
    )


def check_agreement(
    state: CheckpointState, table_path: str, store: TableStore, table_name: str | None = None
) -> None:
    """Raise :class:`~lakehouse_assets.errors.CheckpointMismatchError` unless the table at
    ``table_path`` holds exactly what the checkpoint says its query has written.

    With T the last batch the query committed to the table (its app transaction) and the
    checkpoint's last planned (P) and done (C) batches, they agree when T == C, or when
    T == P == C + 1: the run died after the Delta commit and before Spark recorded the
    batch, and the replay of batch P will be skipped by the sink. T < C: the checkpoint is
    ahead (the table was restored, rolled back or recreated, or the checkpoint is another
    table's). T > P: the checkpoint is behind (an older copy was put back): Spark would plan
    new batches with the numbers the table already holds, and the sink would drop them.
    """
    if state.query_id is None:
        return
    name = table_name or table_name_of(state.location)
    committed = -1 if state.last_committed_batch is None else state.last_committed_batch
    planned = -1 if state.last_planned_batch is None else state.last_planned_batch
    table_batch = store.committed_batch(str(table_path), state.query_id)
    held = -1 if table_batch is None else table_batch
    if held == committed or held == planned == committed + 1:
        return
    holds = (
        f"the table holds batch {held} of query {state.query_id} as its last"
        if held >= 0 else
        f"the table holds no batch of query {state.query_id}"
        + ("" if store.exists(str(table_path)) else " (there is no table at all)")
    )
    recovery = (
        f"Rebuild the checkpoint from what the table holds with `lakehouse repair {name}` (the old "
        f"checkpoint is kept aside), or full-refresh the table with `lakehouse reset {name}`."
    )
    if held < committed:
        message = (
            f"The checkpoint {state.location} is ahead of the Delta table {table_path}: it records "
            f"batch {committed} as done, but {holds}. The table was restored, rolled back or "
            f"recreated since, or the checkpoint belongs to another table; resuming would skip "
            f"what batches {held + 1}..{committed} read, which the table does not have. {recovery}"
        )
    elif held > planned:
        message = (
            f"The checkpoint {state.location} is behind the Delta table {table_path}: its last "
            f"planned batch is {planned} (last done {committed}), but {holds}. An older copy of "
            f"the checkpoint was put back; resuming would plan new batches under numbers the "
            f"table already holds, and they would be skipped as written: their rows would be "
            f"lost. {recovery}"
        )
    else:
        message = (
            f"The checkpoint {state.location} and the Delta table {table_path} disagree: the "
            f"checkpoint's last planned batch is {planned} and its last done batch {committed}, "
            f"but {holds}. {recovery}"
        )
    raise CheckpointMismatchError(message, checkpoint=state.location, table=str(table_path))


def validate_checkpoint(
    location: str, table_paths: Sequence[str], store: TableStore, table_name: str | None = None
) -> CheckpointState | None:
    """Read the checkpoint at ``location`` and check it against every table its query
    writes (a routed query writes two); the state, or None when there is no checkpoint."""
    state = read_checkpoint(location, table_name)
    if state is not None:
        for path in table_paths:
            check_agreement(state, path, store, table_name)
    return state


@dataclass(frozen=True)
class BatchOffsets:
    """What Spark logged in ``offsets/N`` before running batch N: the batch's watermark and
    timestamp (``current_timestamp()`` in the batch) and where each source ends.

    The exactly-once sink records it in the batch's Delta commit, so a checkpoint can be
    rebuilt from the table (:mod:`lakehouse_assets.storage.checkpoint_repair`).
    """

    watermark_ms: int
    timestamp_ms: int
    sources: tuple[Any, ...]  # parsed JSON per source; None for a source without an offset
    conf: dict[str, str] = field(default_factory=dict, compare=False)

    def to_json(self) -> str:
        """The compact form stored in a commit (the session settings are left out)."""
        return json.dumps(
            {"batchWatermarkMs": self.watermark_ms, "batchTimestampMs": self.timestamp_ms, "sources": list(self.sources)},
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
    file = locate(str(location)).child("offsets", str(batch_id))
    try:
        lines = _read_log(str(location), file, None, body_lines=1)
        metadata = json.loads(lines[1])
        sources = _read_offsets(str(location), file, None)
        return BatchOffsets(
            int(metadata.get("batchWatermarkMs", 0)), int(metadata.get("batchTimestampMs", 0)),
            sources, dict(metadata.get("conf") or {}),
        )
    except (CorruptCheckpointError, OSError, ValueError, TypeError):
        return None


def check_sources(state: CheckpointState, store: TableStore, table_name: str | None = None, root: Any = None) -> None:
    """Raise :class:`~lakehouse_assets.errors.SourceRecreatedError` when a Delta table the
    query reads is gone, or was recreated (a full refresh) since the checkpoint's last
    batch: the checkpoint's positions are versions of the old table.

    The Delta source stamps its offsets with the table's path and id; other sources
    (files) are not checked here. ``root`` (the lakehouse root) lets the message name the
    upstream table as ``layer.name``.
    """
    name = table_name or table_name_of(state.location)
    for offset in state.source_offsets:
        if not isinstance(offset, dict) or "tableId" not in offset or "table" not in offset:
            continue
        upstream_path = str(offset["table"])
        upstream = _name_under(upstream_path, root)
        current = store.table_id(upstream_path)
        if current == offset["tableId"]:
            continue
        what = "no longer exists" if current is None else f"was recreated (id {offset['tableId']} is now {current}), by a full refresh"
        then = (
            f"Materialize {upstream} first; then full-refresh {name}"
            if current is None else f"Full-refresh {name}"
        )
        raise SourceRecreatedError(
            f"{name} streams from {upstream} ({upstream_path}), which {what} since {name} last "
            f"read it: the positions in checkpoint {state.location} are versions of the old table, "
            f"so resuming would skip or repeat rows. {then} so it reads {upstream} again from the "
            f"start: `lakehouse reset {name} --yes` (or run it with the full_refresh config), and "
            f"the same for the tables that stream from {name}."
        )


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


def _name_under(path: str, root: Any) -> str:
    """``layer.name`` of a table path under the lakehouse root, else the path."""
    if root is not None:
        prefix = str(root).rstrip("/") + "/"
        if path.startswith(prefix) and path[len(prefix):].count("/") == 1:
            return path[len(prefix):].replace("/", ".")
    return path


def table_name_of(location: str) -> str:
    """``layer.name`` from a checkpoint path ``.../_checkpoints/<layer>/<name>``."""
    parts = str(location).rstrip("/").split("/")
    return ".".join(parts[-2:]) if len(parts) >= 2 else str(location)


# -- reading the files ---------------------------------------------------------------------------
def _query_id(location: str, metadata: Location, name: str | None) -> str:
    text = _read_checked(location, metadata, name)
    try:
        query_id = json.loads(text)["id"]
    except (ValueError, KeyError, TypeError):
        _corrupt(location, metadata, "does not hold the query id as JSON ({\"id\": ...})", name)
    if not isinstance(query_id, str) or not query_id:
        _corrupt(location, metadata, "holds no query id", name)
    return query_id


def _read_offsets(location: str, file: Location, name: str | None) -> tuple[Any, ...]:
    lines = _read_log(location, file, name, body_lines=1)
    sources = lines[2:]
    if not sources:
        _corrupt(location, file, "is truncated: it names no source offset", name)
    offsets = []
    for line in sources:
        if line == "-":
            offsets.append(None)
            continue
        try:
            offsets.append(json.loads(line))
        except ValueError:
            _corrupt(location, file, f"has a source offset that is not JSON ({line[:80]!r})", name)
    return tuple(offsets)


def _read_log(location: str, file: Location, name: str | None, *, body_lines: int) -> list[str]:
    """A ``v1`` log file's lines, checked: the version line, then ``body_lines`` JSON objects."""
    lines = _read_checked(location, file, name).split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    version = _VERSION_LINE.fullmatch(lines[0]) if lines else None
    if version is None:
        _corrupt(location, file, "does not start with a log version line (v1): it is empty or garbled", name)
    if int(version.group(1)) > _SUPPORTED_LOG_VERSION:
        _corrupt(location, file, f"has log version {lines[0]}, newer than this Spark reads", name)
    if len(lines) < 1 + body_lines:
        _corrupt(location, file, "is truncated", name)
    for line in lines[1 : 1 + body_lines]:
        try:
            parsed = json.loads(line)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            _corrupt(location, file, f"has a garbled line ({line[:80]!r})", name)
    return lines


def _check_source_logs(location: str, checkpoint: Location, name: str | None) -> None:
    """The file sources' logs (``sources/<i>/N`` and ``N.compact``) Spark reads on restart:
    the latest compacted file and every file after it."""
    sources = checkpoint.child("sources")
    if not sources.exists():
        return
    for source in sources.fs.get_file_info(pafs.FileSelector(sources.path, recursive=False)):
        if source.type != pafs.FileType.Directory:
            continue
        folder = Location(sources.fs, source.path)
        entries = {}
        for info in folder.fs.get_file_info(pafs.FileSelector(folder.path, recursive=False)):
            stem = info.base_name.removesuffix(".compact")
            if info.type == pafs.FileType.File and stem.isdigit():
                entries[int(stem)] = info
        compacted = [batch for batch, info in entries.items() if info.base_name.endswith(".compact")]
        first = max(compacted) if compacted else 0
        for batch in sorted(b for b in entries if b >= first):
            file = Location(folder.fs, entries[batch].path)
            lines = _read_log(location, file, name, body_lines=0)
            for line in lines[1:]:
                try:
                    entry = json.loads(line)
                except ValueError:
                    entry = None
                if not isinstance(entry, dict) or "path" not in entry:
                    _corrupt(location, file, f"has a garbled file entry ({line[:80]!r})", name)


def _read_checked(location: str, file: Location, name: str | None) -> str:
    """The file's text; a checksum Hadoop wrote beside it (``.<name>.crc``) must match,
    since Spark refuses the file otherwise."""
    try:
        with file.fs.open_input_stream(file.path) as stream:
            data = stream.read()
    except FileNotFoundError:
        _corrupt(location, file, "is missing", name)
    except OSError as exc:
        _corrupt(location, file, f"cannot be read ({exc})", name)
    folder, _, base = file.path.rpartition("/")
    crc = Location(file.fs, f"{folder}/.{base}.crc")
    if isinstance(file.fs, pafs.LocalFileSystem) and crc.exists():
        with crc.fs.open_input_stream(crc.path) as stream:
            if not _crc_matches(data, stream.read()):
                _corrupt(location, file, f"does not match its checksum file {crc.path} (it was changed or cut short)", name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        _corrupt(location, file, "is not UTF-8 text (garbled)", name)


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


def _corrupt(location: str, file: Location, problem: str, name: str | None) -> NoReturn:
    raise CorruptCheckpointError(str(location), file.path, problem, name)


__all__ = [
    "CheckpointState",
    "batch_ids",
    "check_agreement",
    "check_sources",
    "BatchOffsets",
    "read_batch_offsets",
    "read_checkpoint",
    "table_name_of",
    "validate_checkpoint",
]
