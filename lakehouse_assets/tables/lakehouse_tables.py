"""The lakehouse's tables by name, ``layer.name``, in one Spark session.

Without delta-spark, Spark's catalog cannot hold a Delta table, so names are resolved here:
:meth:`LakehouseTables.table` and :meth:`~LakehouseTables.read_stream` read a table through
the storage layer, and :meth:`~LakehouseTables.sql` runs a query whose ``FROM bronze.recordings``
(or ``STREAM(bronze.recordings)``, or ``... VERSION AS OF 3``) is read the same way, through a
temporary view of this session named after the table (:mod:`.sql_refs` finds the names).
Views are registered again by every query, so a query sees each table as it stands when
the query is made; they belong to the session, and each run has a session of its own on the
engine. A native delta-spark engine would register the tables in Spark's catalog instead,
and the queries would not change.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.errors import LakehouseError, UnknownTableError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore, StreamOptions, TableStore
from lakehouse_assets.storage.discovery import discover_tables
from lakehouse_assets.tables.sql_refs import TableRef, find_table_refs, rewrite, unknown_tables

# Views this module registers start with it, so they cannot collide with a user's.
VIEW_PREFIX = "__lakehouse__"
# A name in these layers is a lakehouse table, whether or not it has been written yet.
MEDALLION_LAYERS = ("bronze", "silver", "gold")


class LakehouseTables:
    """The tables under the lakehouse root, by name, in ``spark``."""

    def __init__(self, spark: SparkSession, settings: LakehouseSettings | None = None,
                 store: TableStore | None = None) -> None:
        self.spark = spark
        self.settings = settings or LakehouseSettings.from_env()
        self.store = store or DeltaTableStore()

    def names(self) -> list[str]:
        """Every table as ``layer.name``, layers in data-flow order."""
        return discover_tables(self.settings.root)

    def table(self, name: str, *, version: int | None = None, timestamp: str | dt.datetime | None = None) -> DataFrame:
        """The table as it stands, or as it stood at ``version`` or ``timestamp`` (the last
        version committed at or before it; a time without a zone is UTC)."""
        path = self._path(name)
        if timestamp is not None:
            version = self.version_at(name, timestamp)
        return self.store.read(self.spark, path, version=version)

    def read_stream(self, name: str, options: StreamOptions | None = None) -> DataFrame:
        """The table as a stream: the rows each new version adds, once per checkpoint."""
        return self.store.read_stream(self.spark, self._path(name), options)

    def sql(self, query: str, *, versions: Mapping[str, int] | None = None,
            timestamps: Mapping[str, str] | None = None) -> DataFrame:
        """Run ``query`` with its table names resolved. ``versions`` / ``timestamps`` pin a
        table (``{"silver.recordings_enriched": 3}``) wherever the query reads it, as
        ``VERSION AS OF`` / ``TIMESTAMP AS OF`` pin one reference."""
        known = self.names()
        missing = unknown_tables(query, known, MEDALLION_LAYERS)
        missing += [name for name in [*(versions or {}), *(timestamps or {})] if name not in known]
        if missing:
            raise UnknownTableError(missing[0], str(self.settings.root), known)
        refs = find_table_refs(query, known)
        views = [self._register(ref, versions or {}, timestamps or {}) for ref in refs]
        return self.spark.sql(rewrite(query, refs, views))

    def version_at(self, name: str, timestamp: str | dt.datetime) -> int:
        """The table's last version committed at or before ``timestamp``."""
        when = _utc(timestamp)
        history = self.store.history(self._path(name))
        before = [entry.version for entry in history if _utc(entry.timestamp) <= when]
        if not before:
            first = min(history, key=lambda entry: entry.version)
            raise LakehouseError(
                f"Table {name} did not exist yet at {when:%Y-%m-%d %H:%M:%S} UTC: its first version "
                f"was committed at {_utc(first.timestamp):%Y-%m-%d %H:%M:%S} UTC. Ask for a later time."
            )
        return max(before)

    def _register(self, ref: TableRef, versions: Mapping[str, int], timestamps: Mapping[str, str]) -> str:
        """Register the view ``ref`` reads; its name."""
        view = VIEW_PREFIX + ref.table.replace(".", "__")
        if ref.stream:
            df, view = self.read_stream(ref.table), view + "__stream"
        else:
            version = ref.version if ref.version is not None else versions.get(ref.table)
            timestamp = ref.timestamp if ref.timestamp is not None else timestamps.get(ref.table)
            if timestamp is not None and version is None:
                version = self.version_at(ref.table, timestamp)
            df = self.table(ref.table, version=version)
            if version is not None:
                view += f"__v{version}"
        df.createOrReplaceTempView(view)
        return view

    def _path(self, name: str) -> str:
        known = self.names()
        if name not in known:
            raise UnknownTableError(name, str(self.settings.root), known)
        return str(self.settings.table_path(*name.split(".")))


def _utc(value: str | dt.datetime) -> dt.datetime:
    when = value if isinstance(value, dt.datetime) else _parse_time(value)
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def _parse_time(text: str) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise LakehouseError(
            f"Cannot read {text!r} as a time: give an ISO time such as 2026-11-25 or 2026-11-25T10:30:00"
        ) from exc
