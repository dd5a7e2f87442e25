"""The lakehouse's tables maintained by name (``layer.name``): compacted and vacuumed each under
its write lock, VACUUM told about every streaming reader the lakehouse has.

What it promises on top of :mod:`lakehouse_assets.storage.maintenance`: maintenance never
runs while a run writes the table (it takes the table's lock, as writers do, and waits for
one that holds it), and a VACUUM is always checked against every query checkpointed under
``$LAKEHOUSE_ROOT/_checkpoints``, so no caller can forget a reader. ``lakehouse optimize``,
``lakehouse vacuum`` and the Dagster maintenance job all go through here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lakehouse_assets.errors import UnknownTableError
from lakehouse_assets.settings import CHECKPOINTS_DIR, LakehouseSettings
from lakehouse_assets.storage import DeltaRsTableStore, OptimizeResult, StreamReader, TableStore, VacuumResult
from lakehouse_assets.storage.discovery import discover_tables, is_table
from lakehouse_assets.storage.maintenance import DEFAULT_RETENTION
from lakehouse_assets.storage.stream_readers import stream_readers
from lakehouse_assets.storage.table_lock import table_lock

# A run writing the table holds its lock for one materialization: a minute covers most.
DEFAULT_LOCK_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class TableMaintenance:
    """Compaction and VACUUM of the tables under ``settings.root``, by name."""

    settings: LakehouseSettings
    store: TableStore = field(default_factory=DeltaRsTableStore)
    lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS
    holder: str = "table maintenance"  # who holds the lock, for a writer kept waiting

    def names(self) -> list[str]:
        """Every table under the root, as ``layer.name``, layers in data-flow order."""
        return discover_tables(self.settings.root)

    def path(self, name: str) -> Path:
        """The folder of the existing table ``name``."""
        layer, _, table = name.partition(".")
        path = self.settings.table_path(layer, table)
        if not is_table(path):
            raise UnknownTableError(name, str(self.settings.root), self.names())
        return path

    def optimize(self, name: str, *, z_order: Sequence[str] | None = None,
                 target_size: int | None = None) -> OptimizeResult:
        """Compact (or Z-order by ``z_order``) the table ``name``, holding its write lock."""
        path = self.path(name)
        with table_lock(self.settings.root, name, timeout_seconds=self.lock_timeout_seconds, holder=self.holder):
            return self.store.optimize(str(path), target_size=target_size, z_order=z_order)

    def vacuum(self, name: str, *, retention: dt.timedelta = DEFAULT_RETENTION, dry_run: bool = False) -> VacuumResult:
        """Vacuum the table ``name`` (list only, with ``dry_run``), holding its write lock and
        checked against every streaming reader of it."""
        path = self.path(name)
        with table_lock(self.settings.root, name, timeout_seconds=self.lock_timeout_seconds, holder=self.holder):
            return self.store.vacuum(str(path), retention=retention, dry_run=dry_run, readers=self.readers(name))

    def readers(self, name: str) -> list[StreamReader]:
        """The streaming queries reading the table ``name``, at the positions they resume from."""
        path = self.path(name)
        return stream_readers(str(path), self.store.table_id(str(path)), self.settings.root / CHECKPOINTS_DIR)


__all__ = ["DEFAULT_LOCK_TIMEOUT_SECONDS", "DEFAULT_RETENTION", "TableMaintenance"]
