"""The lakehouse's tables in Spark's own catalog, by name (``layer.name``).

Each layer is a schema at its folder and each table an external Delta table at its own
(``$LAKEHOUSE_ROOT/<layer>/<name>``; ``system`` at ``_system``), so that
``SELECT ... FROM silver.recordings_enriched``, ``STREAM(bronze.recordings)``,
``VERSION AS OF``, ``DESCRIBE HISTORY``, ``spark.read.table`` and ``readStream.table`` are
Spark's and Delta's own, in asset bodies, SQL assets, ``lakehouse sql`` / ``shell`` and any
client attached to the engine.

The catalog is Spark's in-memory one. It belongs to one driver (a run's embedded JVM, or the
engine, whose sessions all share it) and stores nothing: several processes at once never
contend for a metastore (embedded Derby would lock its folder to one JVM), and the folders
stay the truth about which tables exist. A driver registers what it finds on disk when a
session starts, and a table's first write registers it (:func:`register_tables` both).
The Delta log stays the truth about a table's schema and versions: the catalog holds only
its location.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.sql import SparkSession

from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.storage.discovery import discover_tables
from lakehouse_assets.storage.merge import quote


def register_tables(spark: SparkSession, settings: LakehouseSettings, names: Sequence[str] | None = None) -> list[str]:
    """Register in ``spark``'s catalog the tables under the lakehouse root it lacks (or
    those of ``names``); the names registered. One catalog listing per layer when nothing
    is new.

    A layer registered for another root (a driver that served another lakehouse: a test
    session does) is moved to this one, its external tables unregistered first; their data
    stays where it is, and a table created in the catalog itself (managed) is left alone."""
    wanted: dict[str, list[str]] = {}
    for name in discover_tables(settings.root) if names is None else names:
        layer, _, table = name.partition(".")
        wanted.setdefault(layer, []).append(table)
    if not wanted:
        return []
    store = DeltaTableStore()
    schemas = {database.name: database.locationUri for database in spark.catalog.listDatabases()}
    registered = []
    for layer, tables in wanted.items():
        folder = settings.layer_path(layer)
        present: set[str] = set()
        if layer not in schemas:
            spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote(layer)} LOCATION {_literal(folder)}")
        elif _local_path(schemas[layer]) != str(folder):
            spark.sql(f"ALTER SCHEMA {quote(layer)} SET LOCATION {_literal(folder)}")
            for listed in spark.catalog.listTables(layer):
                if listed.tableType == "EXTERNAL":
                    spark.sql(f"DROP TABLE IF EXISTS {quote(layer)}.{quote(listed.name)}")
        else:
            present = {listed.name for listed in spark.catalog.listTables(layer)}
        for table_name in tables:
            # A folder whose first write never committed holds no table yet.
            if table_name not in present and store.exists(str(settings.table_path(layer, table_name))):
                spark.sql(f"CREATE TABLE IF NOT EXISTS {quote(layer)}.{quote(table_name)} USING delta "
                          f"LOCATION {_literal(settings.table_path(layer, table_name))}")
                registered.append(f"{layer}.{table_name}")
    return registered


def _local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path).rstrip("/") if parsed.scheme in ("file", "") else uri


def _literal(path: Path) -> str:
    return "'" + str(path).replace("\\", "\\\\").replace("'", "\\'") + "'"


__all__ = ["register_tables"]
