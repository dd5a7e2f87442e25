"""The lakehouse's tables by name, ``layer.name``, in one Spark session, registered in its
own catalog (:mod:`.catalog`) so names are Spark's; a name in a medallion layer that the
lakehouse lacks is named with the tables there are.
"""

from __future__ import annotations

import datetime as dt
import re

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.errors import LakehouseError, UnknownTableError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore, StreamOptions
from lakehouse_assets.storage.discovery import discover_tables
from lakehouse_assets.tables.catalog import register_tables

# Spark's error for a name its catalog lacks, and how it spells the name.
_NOT_FOUND = ("TABLE_OR_VIEW_NOT_FOUND", "DELTA_TABLE_NOT_FOUND")
_NAME_PART = re.compile(r"`((?:[^`]|``)*)`|([^.`]+)")
# A name in these layers is a lakehouse table, whether or not it has been written yet.
MEDALLION_LAYERS = ("bronze", "silver", "gold")


class LakehouseTables:
    """The tables under the lakehouse root, by name, in ``spark``."""

    def __init__(self, spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore) -> None:
        self.spark = spark
        self.settings = settings
        self.store = store
        register_tables(spark, self.settings, store)

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

    def sql(self, query: str) -> DataFrame:
        """Run ``query``, its table names resolved by Spark's catalog."""
        try:
            return self.spark.sql(query)
        except AnalysisException as exc:
            missing = _missing_table(exc)
            if missing is not None and missing.partition(".")[0] in MEDALLION_LAYERS:
                raise UnknownTableError(missing, str(self.settings.root), self.names()) from exc
            raise

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


def _missing_table(exc: AnalysisException) -> str | None:
    """The ``layer.name`` an error says Spark's catalog lacks, or None for another error."""
    condition = exc.getCondition() or ""
    if not condition.startswith(_NOT_FOUND):
        return None
    parameters = exc.getMessageParameters() or {}
    relation = parameters.get("relationName") or parameters.get("tableName") or ""
    parts = [quoted.replace("``", "`") if quoted else plain for quoted, plain in _NAME_PART.findall(relation)]
    return ".".join(parts[-2:]) if len(parts) >= 2 else None
