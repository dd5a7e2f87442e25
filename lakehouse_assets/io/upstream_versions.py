"""What a table's query had to read: the versions of the tables it streams, as a run found
them before starting the query, recorded on the table's materialization (``upstream_versions``).

A query run with ``availableNow`` reads everything its sources held when it started, so once
a materialization is recorded, the table has read its upstream tables at least to the
versions it names. The next run compares them with the tables as they are now: the same
tables (by Delta table id) at the same versions, and the query has nothing to read and is not
started, which saves its start-up (seconds on every table a run touches).

Only public records are read: the upstream tables' versions and ids (Delta's log, through
delta-rs) and the table's last materialization (Dagster's instance). Without a record (a new
Dagster instance, a run that died before its materialization was recorded, a table written
outside Dagster since) the query is started and finds out for itself: skipping is an
optimisation, never what keeps a batch from being read twice or lost (the checkpoint and the
tables' app transactions are).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import TableSpec
from lakehouse_assets.storage import DeltaTableStore

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
    def now(cls, spec: TableSpec, root: Path, store: DeltaTableStore) -> UpstreamVersions | None:
        """The tables ``spec`` streams in the lakehouse at ``root`` as they are now; None when
        it streams none it names (a query of landed files, one declared without
        ``streams_from``) or one is not there."""
        if not spec.streams_from:
            return None
        settings = LakehouseSettings(root)
        found = {}
        for table in spec.streams_from:
            layer, _, name = table.partition(".")
            path = str(settings.table_path(layer, name))
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
