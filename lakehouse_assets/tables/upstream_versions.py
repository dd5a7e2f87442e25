"""What a table's query had to read: the versions of the tables it streams, as a run found
them before starting the query, recorded on the table's materialization (``upstream_versions``).

A query run with ``availableNow`` reads everything its sources held when it started, so once
a materialization is recorded, the table has read its upstream tables at least to the
versions it names. The next run compares them with the tables as they are now: the same
tables (by Delta table id) at the same versions, and the query has nothing to read and is not
started, which saves its start-up (seconds on every table a run touches). A VACUUM of an
upstream table asks the same records how far each reader has read
(:func:`recorded_readers`), so it deletes no file one has yet to read.

Only queries that read all they find record it (``availableNow``, ``once``): one on a
``processingTime`` trigger stops at its timeout, wherever it is. A query of landed files
records an empty mapping: it reads no table.

Only public records are read: the upstream tables' versions and ids (Delta's log, through
delta-rs) and the table's last materialization (Dagster's instance). Without a record (a new
Dagster instance, a run that died before its materialization was recorded, a table written
outside Dagster since) the query is started and finds out for itself: skipping is an
optimisation, never what keeps a batch from being read twice or lost (the checkpoint and the
tables' app transactions are).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.location import Location
from lakehouse_assets.settings import CHECKPOINTS_DIR, LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore, StreamReader

#: The materialization metadata entry: ``{"layer.name": {"table_id": ..., "version": N}}``.
UPSTREAM_VERSIONS = "upstream_versions"


@dataclass(frozen=True)
class TableVersion:
    """One table as a run found it: its Delta table id (a table dropped and created again
    has a new one) and its version."""

    table_id: str
    version: int


@dataclass(frozen=True)
class UpstreamVersions:
    """The tables a query streams, by ``layer.name``, as a run found them."""

    tables: Mapping[str, TableVersion]

    @classmethod
    def now(cls, streams_from: Sequence[str], settings: LakehouseSettings,
            store: DeltaTableStore) -> UpstreamVersions | None:
        """The tables named in ``streams_from`` (``layer.name``) as they are now; None when
        there are none (a query of landed files, one declared without ``streams_from``: what
        it reads is unknown) or one is not there."""
        if not streams_from:
            return None
        found = {}
        for table in streams_from:
            path = str(settings.table_path(*table.split(".", 1)))
            if not store.exists(path):
                return None
            snapshot = store.snapshot(path)
            found[table] = TableVersion(snapshot.table_id, snapshot.version)
        return cls(found)

    @classmethod
    def recorded(cls, metadata: Mapping[str, Any]) -> UpstreamVersions | None:
        """The versions a materialization's ``metadata`` recorded, or None."""
        entry = metadata.get(UPSTREAM_VERSIONS)
        data = entry.data if isinstance(entry, dg.JsonMetadataValue) else entry
        if not isinstance(data, Mapping):
            return None
        return cls({table: TableVersion(str(read["table_id"]), int(read["version"])) for table, read in data.items()})

    def metadata(self) -> dict[str, dg.MetadataValue]:
        """The entry a materialization records them in (the UI shows what each run read to)."""
        read = {table: {"table_id": at.table_id, "version": at.version} for table, at in sorted(self.tables.items())}
        return {UPSTREAM_VERSIONS: dg.MetadataValue.json(read)}


def last_recorded(instance: dg.DagsterInstance, key: dg.AssetKey) -> Mapping[str, Any]:
    """The metadata of the latest materialization of ``key`` in ``instance`` (Dagster's
    record of the table's last run); empty when there is none."""
    event = instance.get_latest_materialization_event(key)
    materialization = event.asset_materialization if event is not None else None
    return materialization.metadata if materialization is not None else {}


def recorded_readers(instance: dg.DagsterInstance | None, settings: LakehouseSettings, table: str,
                     table_id: str | None) -> list[StreamReader]:
    """The streaming queries of the lakehouse that may read ``table`` (``layer.name``, Delta
    id ``table_id``), each with the version it had read whole at its table's last
    materialization (its ``upstream_versions``), by table.

    Every query with a checkpoint under the lakehouse's ``_checkpoints`` counts, whether or
    not an asset still defines it. One whose record names ``table`` under another id read a
    table since dropped, and one whose record does not name it reads other tables: neither
    reads this one. One with no record (never finished a run, a Dagster instance that does
    not know it, or no instance) may read anything: its version is None."""
    base = settings.root / CHECKPOINTS_DIR
    found = []
    for layer in _query_folders(base):
        for name in _query_folders(base / layer):
            reader = f"{layer}.{name}"
            if reader == table:
                continue
            metadata = last_recorded(instance, dg.AssetKey([layer, name])) if instance else {}
            read = UpstreamVersions.recorded(metadata)
            checkpoint = str(base / layer / name)
            if read is None:
                found.append(StreamReader(reader, None, checkpoint))
            elif table in read.tables and read.tables[table].table_id == table_id:
                found.append(StreamReader(reader, read.tables[table].version, checkpoint))
    return found


def _query_folders(folder: Location) -> list[str]:
    # Hidden folders are checkpoints a repair moved aside (``.<name>.damaged-...``).
    return [name for name in folder.folders() if not name.startswith((".", "_"))]
