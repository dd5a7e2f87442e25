"""Checkpoints written before Delta Lake's connector read the tables, converted to Delta's offsets.

Until the project used Delta's own streaming source it read Delta tables with one of its own,
whose offsets were ``{"version", "index", "snapshot", "table", "tableId"}``: every data file
up to the ``index``-th of ``version`` read (of the table's snapshot at that version, when
``snapshot``). Delta's source cannot resume from them. Converted, a position becomes Delta's
``{"reservoirId", "reservoirVersion", "index", "isStartingVersion"}``:

- a version read whole (the snapshot or the commit's last file read) becomes the next
  version, before its first file: ``(version + 1, -1, false)``;
- a version not begun (index -1 of a commit) stays where it is: ``(version, -1, false)``;
- a version read in part (a batch cut by ``maxFilesPerTrigger``) is refused: the two sources
  order a version's files differently, so no position of Delta's means the same files.

Every ``offsets/N`` of the checkpoint is rewritten, so that a batch Spark replays after a
crash starts where it started before. Nothing else changes: the query id, the commits, the
file sources' logs and the tables' own records of each batch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.storage._checkpoint_files import BatchOffsets, batch_ids, read_batch_offsets
from lakehouse_assets.storage._delta_log import read_commit, snapshot_files
from lakehouse_assets.storage._files import locate

# The version of Delta's offset format (DeltaSourceOffset.VERSION_1).
_DELTA_OFFSET_FORMAT = 1


@dataclass(frozen=True)
class UpgradeResult:
    """What converting one checkpoint did: the ``offsets/N`` files rewritten (none when it
    already had Delta's offsets, or reads no Delta table)."""

    checkpoint: str
    batches_converted: tuple[int, ...]


def is_legacy_offset(offset: Any) -> bool:
    """Whether a source's offset is the project's own Delta source's."""
    return (isinstance(offset, Mapping) and "tableId" in offset and "snapshot" in offset
            and "reservoirId" not in offset)


def delta_offset(offset: Mapping[str, Any], checkpoint: str) -> dict[str, Any]:
    """Delta's offset for the legacy ``offset`` (see the module's rules); raises
    :class:`LakehouseError` naming the checkpoint for a version read in part."""
    table, table_id = str(offset.get("table") or ""), str(offset["tableId"])
    version, index, snapshot = int(offset.get("version", -1)), int(offset.get("index", -1)), bool(offset["snapshot"])
    if version < 0:
        next_version = 0  # nothing read yet: from the table's first version
    elif not snapshot and index < 0:
        next_version = version
    else:
        try:
            files = snapshot_files(table, version) if snapshot else read_commit(table, version).added
        except (OSError, ValueError) as exc:
            raise LakehouseError(
                f"Cannot convert checkpoint {checkpoint}: it stands in version {version} of {table}, which "
                f"cannot be read any more ({exc}). Full-refresh the table the checkpoint belongs to instead "
                "(`lakehouse reset <layer.name> --yes`).") from exc
        if index < len(files) - 1:
            raise LakehouseError(
                f"Cannot convert checkpoint {checkpoint}: its last batch read {index + 1} of the "
                f"{len(files)} files of version {version} of {table} (a batch limit such as "
                "maxFilesPerTrigger), and Delta's source orders a version's files its own way. Full-refresh "
                "the table the checkpoint belongs to instead (`lakehouse reset <layer.name> --yes`).")
        next_version = version + 1
    return {"sourceVersion": _DELTA_OFFSET_FORMAT, "reservoirId": table_id, "reservoirVersion": next_version,
            "index": -1, "isStartingVersion": False}


def needs_upgrade(location: str) -> bool:
    """Whether the checkpoint at ``location`` holds a position of the legacy source."""
    return bool(_legacy_batches(location))


def upgrade_checkpoint(location: str) -> UpgradeResult:
    """Convert every legacy Delta position in the checkpoint at ``location`` in place; the
    other sources' offsets (files) are kept as they are. Converting twice changes nothing."""
    converted: list[int] = []
    planned: dict[int, tuple[BatchOffsets, tuple[Any, ...]]] = {}
    for batch, logged in _legacy_batches(location).items():
        sources = tuple(delta_offset(s, str(location)) if is_legacy_offset(s) else s for s in logged.sources)
        planned[batch] = (logged, sources)
    # Every batch is converted before any file is written: a refusal leaves the checkpoint whole.
    for batch, (logged, sources) in sorted(planned.items()):
        upgraded = BatchOffsets(logged.watermark_ms, logged.timestamp_ms, sources, logged.conf)
        _replace(Path(location, "offsets", str(batch)), upgraded.log_text())
        converted.append(batch)
    return UpgradeResult(str(location), tuple(converted))


def _legacy_batches(location: str) -> dict[int, BatchOffsets]:
    """The batches whose logged offsets hold a legacy position, by number."""
    found = {}
    for batch in batch_ids(locate(str(location)).child("offsets")):
        logged = read_batch_offsets(str(location), batch)
        if logged is not None and any(is_legacy_offset(s) for s in logged.sources):
            found[batch] = logged
    return found


def checkpoints_under(folder: Path) -> list[Path]:
    """Every streaming checkpoint (a folder with ``offsets`` and ``metadata``) below ``folder``."""
    if not folder.is_dir():
        return []
    return sorted(path.parent for path in folder.rglob("offsets")
                  if path.is_dir() and (path.parent / "metadata").is_file())


def _replace(file: Path, text: str) -> None:
    """Write ``text`` over ``file`` atomically; Hadoop's checksum of the old text goes, since
    Spark would refuse the file against it (and reads it without one)."""
    temporary = file.with_name(f".{file.name}.upgrading")
    temporary.write_text(text)
    os.replace(temporary, file)
    file.with_name(f".{file.name}.crc").unlink(missing_ok=True)


__all__ = ["UpgradeResult", "checkpoints_under", "delta_offset", "is_legacy_offset", "needs_upgrade",
           "upgrade_checkpoint"]
