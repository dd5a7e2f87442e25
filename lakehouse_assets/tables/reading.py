"""What a table's run reads, found before its query starts, and what its commits say it read
(:class:`~lakehouse_assets.storage.batch_record.Reading`): a run whose sources are as its last
completed run read them has nothing to read (:mod:`lakehouse_assets.assets.nothing_to_read`),
and a VACUUM asks how far each reader has read. Skipping is an optimisation only: the
checkpoint and the tables' app transactions keep a batch from being read twice or lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dagster as dg

from lakehouse_assets.location import Location
from lakehouse_assets.settings import CHECKPOINTS_DIR, LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore, HistoryEntry, StreamReader
from lakehouse_assets.storage.batch_record import Reading, TableVersion
from lakehouse_assets.storage.history import newest_first

# Materializations of a table looked through for the one its newest commit's run recorded: a
# lookup kept as it stands for the readers of a run records one without a commit.
_RECENT_MATERIALIZATIONS = 10


def tables_now(tables: Sequence[str], settings: LakehouseSettings, store: DeltaTableStore,
               landed: Mapping[str, tuple[str, ...]] | None = None) -> Reading | None:
    """A run's :class:`Reading`: the tables named (``layer.name``) as they are now, and the
    ``landed`` fingerprints given; None when a table is not there (what would be read is unknown)."""
    found = {}
    for table in tables:
        path = str(settings.table_path(*table.split(".", 1)))
        if not store.exists(path):
            return None
        snapshot = store.snapshot(path)
        found[table] = TableVersion(snapshot.table_id, snapshot.version)
    return Reading(found, dict(landed or {}))


def last_reading(store: DeltaTableStore, path: str) -> HistoryEntry | None:
    """The newest commit of the table at ``path`` recording what its run read; None when there is none."""
    return next((entry for entry in newest_first(store, path) if entry.reading is not None), None)


def completed(instance: dg.DagsterInstance | None, key: dg.AssetKey, commit: HistoryEntry) -> bool:
    """Whether the run that made ``commit`` completed the table's step: it recorded a
    materialization of the table, among the newest few (a run dying between batches records none)."""
    if instance is None or commit.run_id is None:
        return False
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=_RECENT_MATERIALIZATIONS)
    return any(record.run_id == commit.run_id for record in records.records)


def completed_reading(store: DeltaTableStore, path: str, version: int | None,
                      instance: dg.DagsterInstance | None, key: dg.AssetKey) -> Reading | None:
    """What the table at ``path`` had read at ``version`` (None: its latest) as far as a
    completed run read it: its newest commit's reading at or before ``version``, or, when that
    run did not complete (per ``instance``), the newest of an earlier run's commits."""
    newest_run: str | None = None
    for entry in newest_first(store, path):
        if (version is not None and entry.version > version) or entry.reading is None:
            continue
        if newest_run is None:
            newest_run = entry.run_id or ""
            if instance is None or completed(instance, key, entry):
                return entry.reading
        elif entry.run_id != newest_run:
            return entry.reading
    return None


def stream_readers(instance: dg.DagsterInstance | None, settings: LakehouseSettings, store: DeltaTableStore,
                   table: str, table_id: str | None) -> list[StreamReader]:
    """The streaming queries checkpointed under ``_checkpoints`` that may read ``table`` (Delta id
    ``table_id``), each with the version of it its newest completed run had read whole (None:
    unknown, it may read anything)."""
    base = settings.root / CHECKPOINTS_DIR
    found = []
    for layer in _query_folders(base):
        for name in _query_folders(base / layer):
            reader = f"{layer}.{name}"
            if reader == table:
                continue
            checkpoint = str(base / layer / name)
            path = str(settings.table_path(layer, name))
            commit = last_reading(store, path) if store.exists(path) else None
            read = commit.reading if commit is not None and completed(
                instance, dg.AssetKey([layer, name]), commit) else None
            if read is None:
                found.append(StreamReader(reader, None, checkpoint))
            elif table in read.tables and read.tables[table].table_id == table_id:
                found.append(StreamReader(reader, read.tables[table].version, checkpoint))
    return found


def _query_folders(folder: Location) -> list[str]:
    return [name for name in folder.folders() if not name.startswith((".", "_"))]


__all__ = ["completed", "completed_reading", "last_reading", "stream_readers", "tables_now"]
