"""The lakehouse's tables in Spark's own in-memory catalog, by name (``layer.name``): each
layer a schema at its folder, each table an external Delta table at its own, so names are
Spark's and Delta's own everywhere (docs/guides/sql.md). The catalog stores nothing, so the
folders stay the truth; what a driver's catalog was last given (root and tables) is kept as a
global temporary view, so a session on a driver holding every table asks one question, and a
driver given another root drops the old root's tables.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore, local_path
from lakehouse_assets.storage.discovery import discover_tables
from lakehouse_assets.storage.merge import quote, sql_literal
from lakehouse_assets.tables.event_log import register_event_log

# The prefix of the view whose name says what this driver's catalog holds.
_REGISTERED_PREFIX = "lakehouse_registered_"
# What Delta and Spark say when a table was registered between the check and the create.
_ALREADY_EXISTS = ("DELTA_TABLE_ALREADY_EXISTS", "TABLE_OR_VIEW_ALREADY_EXISTS")
#: How often a schema's tables are listed again when another session dropped one of them
#: while the listing looked it up.
_LISTING_ATTEMPTS = 5


def register_tables(spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore,
                    names: Sequence[str] | None = None) -> list[str]:
    """Register in ``spark``'s catalog the tables under the lakehouse root it lacks (or those of
    ``names``); the names registered. A layer registered for another root is moved to this one,
    its external tables unregistered first (their data stays; managed tables are left alone)."""
    # A folder whose first write never committed holds no table yet.
    on_disk = [name for name in (discover_tables(settings.root) if names is None else names)
               if store.exists(str(settings.table_path(*name.split(".", 1))))]
    if names is None:
        same_root = f"{_REGISTERED_PREFIX}{_fingerprint(settings.root)}_"
        marker = same_root + _fingerprint(settings.root, *on_disk)
        global_temp = global_temp_database(spark)
        if spark.catalog.tableExists(f"{global_temp}.{marker}"):
            return []
        for row in spark.sql(f"SHOW VIEWS IN {quote(global_temp)} LIKE '{_REGISTERED_PREFIX}*'").collect():
            view = f"{quote(global_temp)}.{quote(row.viewName)}"
            if row.viewName.startswith(same_root):  # this root's, with other tables: nothing to forget
                spark.sql(f"DROP VIEW IF EXISTS {view}")
                continue
            try:
                previous = spark.sql(f"SELECT root FROM {view}").first()
            except AnalysisException:  # another session of this driver (a run at the same time) dropped it
                continue
            if previous is not None:
                _forget_root(spark, settings, str(previous[0]))
            spark.sql(f"DROP VIEW IF EXISTS {view}")
        registered = _register(spark, settings, on_disk)
        register_event_log(spark, settings.root)
        spark.sql(f"CREATE OR REPLACE GLOBAL TEMPORARY VIEW {marker} AS "
                  f"SELECT {sql_literal(str(settings.root))} AS root")
        return registered
    return _register(spark, settings, on_disk)


def global_temp_database(spark: SparkSession) -> str:
    """Spark's database of global temporary views: ``system`` on the lakehouse's drivers (so the
    event log is ``system.event_log``), ``global_temp`` on one started elsewhere."""
    return str(spark.conf.get("spark.sql.globalTempDatabase", "global_temp"))


def _register(spark: SparkSession, settings: LakehouseSettings, names: Sequence[str]) -> list[str]:
    wanted: dict[str, list[str]] = {}
    for name in names:
        layer, _, table = name.partition(".")
        wanted.setdefault(layer, []).append(table)
    if not wanted:
        return []
    registered = []
    for layer, tables in wanted.items():
        folder = settings.layer_path(layer)
        location = _schema_location(spark, layer)
        present: set[str] = set()
        if location is None:
            spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote(layer)} LOCATION {sql_literal(str(folder))}")
        elif location != str(folder):
            spark.sql(f"ALTER SCHEMA {quote(layer)} SET LOCATION {sql_literal(str(folder))}")
            for external in _external_tables(spark, layer):
                spark.sql(f"DROP TABLE IF EXISTS {quote(layer)}.{quote(external)}")
        else:
            present = {row.tableName for row in spark.sql(f"SHOW TABLES IN {quote(layer)}").collect()
                       if not row.isTemporary}
        for table_name in tables:
            if table_name not in present and _create(spark, settings, layer, table_name):
                registered.append(f"{layer}.{table_name}")
    return registered


def _forget_root(spark: SparkSession, settings: LakehouseSettings, previous: str) -> None:
    """Unregister the external tables of the layers another root ``previous`` registered."""
    if previous == str(settings.root):
        return
    for row in spark.sql("SHOW SCHEMAS").collect():
        location = _schema_location(spark, row.namespace)
        if location is not None and location.rstrip("/").rsplit("/", 1)[0] == previous:
            for external in _external_tables(spark, row.namespace):
                spark.sql(f"DROP TABLE IF EXISTS {quote(row.namespace)}.{quote(external)}")


def _schema_location(spark: SparkSession, layer: str) -> str | None:
    """Where schema ``layer`` of the catalog lives, or None: not by ``listDatabases``, which runs
    Spark jobs (half of the time a run spent registering its tables)."""
    if not spark.catalog.databaseExists(layer):
        return None
    return local_path(spark.catalog.getDatabase(layer).locationUri)


def _external_tables(spark: SparkSession, layer: str) -> list[str]:
    """The external tables of schema ``layer``, by the catalog's own record of each: ``listTables``
    loads each table, and one whose log no longer reads would come back without a type."""
    for attempt in range(1, _LISTING_ATTEMPTS + 1):
        try:
            rows = spark.sql(f"SHOW TABLE EXTENDED IN {quote(layer)} LIKE '*'").collect()
            break
        except AnalysisException as exc:
            # Another session of this driver (a run at the same time on the engine, forgetting
            # the same earlier root) dropped a table between the listing and its lookup.
            if exc.getCondition() != "TABLE_OR_VIEW_NOT_FOUND" or attempt == _LISTING_ATTEMPTS:
                raise
    return [row.tableName for row in rows
            if not row.isTemporary and "\nType: EXTERNAL\n" in f"\n{row.information}\n"]


def _create(spark: SparkSession, settings: LakehouseSettings, layer: str, table: str) -> bool:
    """Register the table at its folder; False when another session of this driver did first."""
    try:
        spark.sql(f"CREATE TABLE IF NOT EXISTS {quote(layer)}.{quote(table)} USING delta "
                  f"LOCATION {sql_literal(str(settings.table_path(layer, table)))}")
    except AnalysisException as exc:
        if exc.getCondition() not in _ALREADY_EXISTS:
            raise
        return False
    return True


def _fingerprint(*parts: object) -> str:
    return hashlib.sha256("\n".join(map(str, parts)).encode()).hexdigest()[:16]


__all__ = ["register_tables"]
