"""The lakehouse's tables maintained by name (``layer.name``): compacted and vacuumed each
under its write lock, so never while a run writes it, and every VACUUM told about every
streaming reader checkpointed under the root (:func:`~lakehouse_assets.tables.reading.stream_readers`),
so no caller can forget one. ``lakehouse optimize``, ``vacuum`` and the maintenance job all go through here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.errors import UnknownTableError
from lakehouse_assets.location import Location
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore, OptimizeResult, StreamReader, VacuumResult
from lakehouse_assets.storage.discovery import discover_tables, is_table
from lakehouse_assets.storage.maintenance import DEFAULT_RETENTION
from lakehouse_assets.storage.table_lock import table_lock
from lakehouse_assets.tables.reading import stream_readers

# A run writing the table holds its lock for one materialization: a minute covers most.
DEFAULT_LOCK_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class TableMaintenance:
    """Compaction and VACUUM of the tables under ``settings.root``, by name, in ``spark``; the
    readers' positions come from the Dagster ``instance`` (None: none known)."""

    spark: SparkSession
    settings: LakehouseSettings
    instance: dg.DagsterInstance | None
    store: DeltaTableStore
    lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS
    holder: str = "table maintenance"  # who holds the lock, for a writer kept waiting

    def names(self) -> list[str]:
        """Every table under the root, as ``layer.name``, layers in data-flow order."""
        return discover_tables(self.settings.root)

    def targets(self, name: str) -> list[str]:
        """What maintaining the table ``name`` covers: the table, then the state tables its sink
        keeps inside it (``layer.name/_cdc_state``), which a merge rewrites every batch."""
        path = self.path(name)
        inside = [folder for folder in path.folders() if folder.startswith("_") and is_table(path / folder)]
        return [name, *(f"{name}/{folder}" for folder in inside)]

    def path(self, target: str) -> Location:
        """The folder of the existing table ``target`` (``layer.name`` or ``layer.name/_folder``)."""
        name, _, inside = target.partition("/")
        layer, _, table = name.partition(".")
        path = self.settings.table_path(layer, table)
        if inside:
            path = path / inside if inside.startswith("_") and "/" not in inside else path / "_"
        if not is_table(path):
            raise UnknownTableError(target, str(self.settings.root), self.names())
        return path

    def optimize(self, name: str, *, z_order: Sequence[str] | None = None,
                 target_size: int | None = None) -> OptimizeResult:
        """Compact (or Z-order by ``z_order``) the table ``name`` (or one of its :meth:`targets`), under its lock."""
        path = self.path(name)
        with self._lock(name):
            return self.store.optimize(self.spark, str(path), target_size=target_size, z_order=z_order)

    def vacuum(self, name: str, *, retention: dt.timedelta = DEFAULT_RETENTION, dry_run: bool = False) -> VacuumResult:
        """Vacuum the table ``name`` (or a :meth:`targets`; ``dry_run``: list only) under its lock, for its readers."""
        path = self.path(name)
        with self._lock(name):
            return self.store.vacuum(self.spark, str(path), retention=retention, dry_run=dry_run,
                                     readers=self.readers(name))

    def readers(self, name: str) -> list[StreamReader]:
        """The streaming queries that may read the table ``name`` (:func:`stream_readers`)."""
        if "/" in name:
            return []
        path = self.path(name)
        return stream_readers(self.instance, self.settings, self.store, name, self.store.table_id(str(path)))

    def _lock(self, target: str) -> AbstractContextManager[None]:
        # A state table is written by its table's sink, under the table's lock.
        table = target.partition("/")[0]
        return table_lock(self.settings.root, table, timeout_seconds=self.lock_timeout_seconds, holder=self.holder)


__all__ = ["DEFAULT_LOCK_TIMEOUT_SECONDS", "DEFAULT_RETENTION", "TableMaintenance"]
