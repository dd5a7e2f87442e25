"""What lies under the lakehouse root: tables, landing folders and streaming checkpoints.

Found by looking at folders, not by loading the asset graph, so the commands see exactly
what is on disk (including tables no asset defines any more) and start without Dagster:

    $LAKEHOUSE_ROOT/<layer>/<table>/_delta_log        a table (layers: not landing, not _*)
    $LAKEHOUSE_ROOT/landing/<source>/...              landed files
    $LAKEHOUSE_ROOT/_checkpoints/<layer>/<table>/     the query that writes <layer>.<table>
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from lakehouse_assets.cli.arguments import TableName
from lakehouse_assets.cli.errors import CommandError
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.settings import CHECKPOINTS_DIR, LANDING_DIR, LakehouseSettings
from lakehouse_assets.simulator.layout import is_data_file_name

if TYPE_CHECKING:
    import pyarrow.dataset
    from deltalake import DeltaTable

DELTA_LOG = "_delta_log"
# The medallion layers first, in the order data flows; any other layer after, by name.
_LAYER_ORDER = {"bronze": 0, "silver": 1, "gold": 2}


def require_root(settings: LakehouseSettings) -> Path:
    """The lakehouse root, which must exist."""
    if not settings.root.is_dir():
        raise CommandError(
            f"No lakehouse at {settings.root}: the folder does not exist. Set LAKEHOUSE_ROOT or "
            "pass --root to point at one, or run `lakehouse land` to start one there.")
    return settings.root


def layers(root: Path) -> list[str]:
    """The layer folders under ``root``: not landing, not the machinery's ``_`` folders."""
    if not root.is_dir():
        return []
    names = [entry.name for entry in root.iterdir()
             if entry.is_dir() and entry.name != LANDING_DIR
             and not entry.name.startswith(("_", "."))]
    return sorted(names, key=lambda name: (_LAYER_ORDER.get(name, len(_LAYER_ORDER)), name))


def discover_tables(root: Path) -> list[str]:
    """Every table under ``root`` as ``layer.name``, layers in data-flow order."""
    found = []
    for layer in layers(root):
        for entry in sorted((root / layer).iterdir()):
            if entry.is_dir() and not entry.name.startswith((".", "_")) and (entry / DELTA_LOG).is_dir():
                found.append(f"{layer}.{entry.name}")
    return found


def require_table(settings: LakehouseSettings, table: TableName) -> Path:
    """The folder of an existing table; otherwise a message that names the path looked at
    and the tables that do exist."""
    root = require_root(settings)
    path = settings.table_path(table.layer, table.name)
    if (path / DELTA_LOG).is_dir():
        return path
    if path.is_dir():
        raise CommandError(
            f"{path} is not a Delta table (it has no {DELTA_LOG} folder), so {table} cannot be "
            "read. Materialize its asset to create it, or remove the folder if it is debris.")
    raise CommandError(f"No table {table}: nothing at {path}. {describe_known_tables(root, str(table))}")


def describe_known_tables(root: Path, wanted: str) -> str:
    """A sentence on what does exist, to follow 'no such table'."""
    known = discover_tables(root)
    if not known:
        return (f"There are no tables under {root} yet: materialize the assets first, or check "
                "LAKEHOUSE_ROOT / --root.")
    close = difflib.get_close_matches(wanted, known, n=1)
    hint = f"Did you mean {close[0]}? " if close else ""
    return f"{hint}Tables under {root}: {', '.join(known)}."


@contextmanager
def reading(table: TableName, path: Path) -> Iterator[None]:
    """Turn a failure to read the Delta table into a message that names it and what to do.

    delta-rs raises its own errors (a damaged log, a missing data file); the project's own
    errors already say what to do and pass through unchanged.
    """
    try:
        yield
    except LakehouseError:
        raise
    except Exception as exc:  # noqa: BLE001 - delta-rs and pyarrow raise many types
        raise CommandError(
            f"Cannot read table {table} at {path}: {exc}. Its Delta log or data files are "
            f"damaged or missing; repair them, or rebuild it with `lakehouse reset {table}`.") from exc


def local_dataset(table: DeltaTable, path: Path) -> pyarrow.dataset.Dataset:
    """The rows of ``table`` (opened from the local folder ``path``, at whatever version it
    was loaded) as a pyarrow dataset.

    Files are read through pyarrow's own local filesystem, not delta-rs's default Python
    filesystem handler: with that handler a process that read rows aborts at exit now and
    then ("terminate called without an active exception", exit 134, or a segfault), which
    would break the exit codes scripts rely on.
    """
    import pyarrow.fs as pafs

    return table.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem()))


def row_count(table: DeltaTable) -> int | None:
    """Rows in the table at its loaded version, from the log's per-file statistics (no data
    file is read); None if a file has no row count, since a partial sum would look exact."""
    import pyarrow as pa
    import pyarrow.compute as pc

    actions = pa.table(table.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return 0
    counts = actions.column("num_records")
    if counts.null_count:
        return None
    return int(pc.sum(counts.cast(pa.int64())).as_py())


def landing_sources(root: Path) -> list[Path]:
    """The source folders under ``root/landing``, by name."""
    landing = root / LANDING_DIR
    if not landing.is_dir():
        return []
    return sorted(entry for entry in landing.iterdir()
                  if entry.is_dir() and not entry.name.startswith(("_", ".")))


def landing_files(source: Path) -> list[Path]:
    """The data files of a source folder, in nested folders too, skipping what ingestion
    skips (``_``/``.`` names, files still being written), in name order."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if is_data_file_name(d)]
        found.extend(Path(folder) / name for name in files if is_data_file_name(name))
    return sorted(found)


def source_file_path(value: str) -> str:
    """A ``_source_file`` value as a plain local path: Spark records file URIs
    (``file:///a/b%20c.json``), the landing folder holds paths (``/a/b c.json``)."""
    if value.startswith("file:"):
        value = unquote(urlparse(value).path)
    return os.path.normpath(value)


@dataclass(frozen=True)
class CheckpointState:
    """How far the query writing one table got: Spark's ``offsets/`` log records a batch it
    is about to run, ``commits/`` a batch it finished."""

    table: str
    path: Path
    last_committed_batch: int | None
    last_offset_batch: int | None
    #: The last planned batch's end offset, one per source (None for a source with none yet).
    last_offsets: tuple[Any, ...] | None
    query_id: str | None
    #: Why part of the checkpoint could not be read, if so.
    error: str | None = None

    @property
    def pending_batch(self) -> int | None:
        """A batch planned but never committed: the query stopped or failed during it, and
        its next run redoes it first."""
        if self.last_offset_batch is None:
            return None
        if self.last_committed_batch is None or self.last_offset_batch > self.last_committed_batch:
            return self.last_offset_batch
        return None

    def as_dict(self) -> dict[str, Any]:
        """The ``status --json`` form."""
        return {"table": self.table, "path": str(self.path),
                "last_committed_batch": self.last_committed_batch,
                "last_offset_batch": self.last_offset_batch,
                "pending_batch": self.pending_batch,
                "last_offsets": None if self.last_offsets is None else list(self.last_offsets),
                "query_id": self.query_id, "error": self.error}


def checkpoints(root: Path) -> Iterator[CheckpointState]:
    """The state of every checkpoint ``root/_checkpoints/<layer>/<table>``."""
    base = root / CHECKPOINTS_DIR
    if not base.is_dir():
        return
    for layer in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for folder in sorted(p for p in layer.iterdir() if p.is_dir() and not p.name.startswith(".")):
            yield read_checkpoint(f"{layer.name}.{folder.name}", folder)


def read_checkpoint(table: str, folder: Path) -> CheckpointState:
    """Read one checkpoint's last batch ids, last offsets and query id; a damaged part is
    reported in ``error``, not raised, so one bad checkpoint does not hide the others."""
    committed = _last_batch(folder / "commits")
    planned = _last_batch(folder / "offsets")
    offsets: tuple[Any, ...] | None = None
    query_id: str | None = None
    problems = []
    if planned is not None:
        offset_file = folder / "offsets" / str(planned)
        try:
            offsets = _parse_offsets(offset_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"cannot read {offset_file}: {exc}")
    metadata = folder / "metadata"
    if metadata.is_file():
        try:
            query_id = json.loads(metadata.read_text(encoding="utf-8")).get("id")
        except (OSError, ValueError, AttributeError) as exc:
            problems.append(f"cannot read {metadata}: {exc}")
    return CheckpointState(table, folder, committed, planned, offsets, query_id,
                           "; ".join(problems) or None)


def _last_batch(log: Path) -> int | None:
    # Batch files are named by their id; Spark's own ".N.crc" and temporary files are not.
    if not log.is_dir():
        return None
    ids = [int(entry.name) for entry in log.iterdir() if entry.name.isdigit()]
    return max(ids) if ids else None


def _parse_offsets(text: str) -> tuple[Any, ...]:
    # Spark's offset log: a version line ("v1"), the batch's metadata as JSON, then one line
    # per source: its offset as JSON, or "-" for a source that has none yet.
    lines = text.splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ValueError("not a Spark offset log file (no version line)")
    return tuple(None if line.strip() == "-" else json.loads(line) for line in lines[2:])
