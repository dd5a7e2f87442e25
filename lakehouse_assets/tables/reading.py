"""What a table's run reads, found before its query starts, and what a table's commits say it
read (:class:`~lakehouse_assets.storage.batch_record.Reading`).

A query run with ``availableNow`` reads everything its sources held when it started, so once
its run has completed, the table has read its sources at least as far as its newest commit
records. The next run compares that with the sources as they are now: the same tables (by
Delta table id) at the same versions, and the query has nothing to read and is not started
(:mod:`lakehouse_assets.assets.nothing_to_read`). A VACUUM of an upstream table asks the same
records how far each reader has read (:func:`stream_readers`), so it deletes no file one has
yet to read.

Only public records are read: the tables' versions and ids and their commits (Delta's log,
through delta-rs), and, for whether the run that made a commit completed, Dagster's record of
the table's latest materialization. Without them the query is started and finds out for
itself: skipping is an optimisation, never what keeps a batch from being read twice or lost
(the checkpoint and the tables' app transactions are).
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
    """The newest commit of the table at ``path`` that records what its run read (a
    maintenance commit, which records none, is passed over); None when there is none."""
    return next((entry for entry in newest_first(store, path) if entry.reading is not None), None)


def completed(instance: dg.DagsterInstance | None, key: dg.AssetKey, commit: HistoryEntry) -> bool:
    """Whether the run that made ``commit`` completed the table's step: it recorded a
    materialization of the table (a run that died between its batches made commits but
    recorded none). Runs since that committed nothing to the table recorded none either, so
    its materialization is among the newest few."""
    if instance is None or commit.run_id is None:
        return False
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=_RECENT_MATERIALIZATIONS)
    return any(record.run_id == commit.run_id for record in records.records)


def completed_reading(store: DeltaTableStore, path: str, version: int | None,
                      instance: dg.DagsterInstance | None, key: dg.AssetKey) -> Reading | None:
    """What the table at ``path`` had read at ``version`` (None: its latest), as far as a
    completed run read it: the reading of its newest commit at or before ``version``, unless
    that commit's run did not complete (Dagster's latest materialization of ``key`` is another
    run's), then the newest of an earlier run's commits. Without an ``instance`` the newest
    commit's reading is taken as it is."""
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
    """The streaming queries of the lakehouse that may read ``table`` (``layer.name``, Delta
    id ``table_id``), each with the version of it its newest completed run had read whole.

    Every query with a checkpoint under the lakehouse's ``_checkpoints`` counts, whether or
    not an asset still defines it. One whose reading names ``table`` under another id read a
    table since dropped, and one whose reading does not name it reads other tables: neither
    reads this one. One with no reading from a completed run (never finished a run, a Dagster
    instance that does not know it, or no instance) may read anything: its version is None."""
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
