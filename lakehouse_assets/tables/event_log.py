"""``system.event_log``: what every batch of every table did, one row per commit, as a view
over the tables' Delta histories computed when it is read (nothing writes it). :func:`events`
reads it through delta-rs without Spark; :func:`register_event_log` names the same rows in
Spark, over a Python data source. What a commit cannot say (Delta's own sink's rows checked, a
failed batch) is not in it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from lakehouse_assets.location import Location, ObjectStore, locate
from lakehouse_assets.storage import HistoryEntry
from lakehouse_assets.storage.batch_record import EXPECTATIONS_KEY
from lakehouse_assets.storage.delta import table_history
from lakehouse_assets.storage.discovery import discover_tables

#: The view's name in Spark's global temporary database (``system.event_log``).
EVENT_LOG_VIEW = "event_log"
#: The Python data source the view reads.
SOURCE_NAME = "lakehouse_event_log"
#: The view's columns, as Spark SQL declares them.
EVENT_LOG_SCHEMA = (
    "table STRING, version BIGINT, committed_at TIMESTAMP, operation STRING, run_id STRING, query_id STRING, "
    "batch_id BIGINT, rows_written BIGINT, rows_checked BIGINT, expectations_failed MAP<STRING, BIGINT>, "
    "started_at TIMESTAMP, duration_ms BIGINT, reading STRING")


@dataclass(frozen=True)
class Event:
    """One commit of one table, as the event log shows it."""

    table: str
    version: int
    committed_at: dt.datetime
    operation: str
    run_id: str | None
    query_id: str | None
    batch_id: int | None
    rows_written: int | None
    rows_checked: int | None
    expectations_failed: dict[str, int] | None
    started_at: dt.datetime | None
    duration_ms: int | None
    reading: str | None

    @classmethod
    def of(cls, table: str, commit: HistoryEntry) -> Event:
        """The event of ``commit`` of ``table`` (``layer.name``)."""
        counts = commit.custom_metadata.get(EXPECTATIONS_KEY)
        counted = json.loads(str(counts)) if counts else None
        started = commit.started_at
        return cls(
            table=table, version=commit.version, committed_at=commit.timestamp, operation=commit.operation,
            run_id=commit.run_id, query_id=commit.query, batch_id=commit.batch_id, rows_written=commit.rows_written,
            rows_checked=int(counted["rows"]) if counted else None,
            expectations_failed={str(k): int(v) for k, v in counted["failed"].items()} if counted else None,
            started_at=started,
            duration_ms=(max(0, int((commit.timestamp - started).total_seconds() * 1000))
                         if started is not None else None),
            reading=commit.reading.to_json() if commit.reading is not None else None,
        )

    def row(self) -> tuple[Any, ...]:
        """The event as a row of the view."""
        return tuple(asdict(self).values())


def events(root: Location, *, table: str | None = None, run_id: str | None = None) -> list[Event]:
    """Every commit of every table under ``root`` (or of ``table``; of run ``run_id``), oldest
    first per table, tables in data-flow order: read from the tables' histories with delta-rs."""
    found = []
    for name in discover_tables(root) if table is None else [table]:
        layer, table_name = name.split(".", 1)
        for commit in reversed(table_history(root / layer / table_name)):
            if run_id is None or commit.run_id == run_id:
                found.append(Event.of(name, commit))
    return found


class _EventLogSource(DataSource):
    """The event log as a Spark data source: options ``root``, and ``endpoint_url`` and ``region``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return EVENT_LOG_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return _EventLogReader(dict(self.options))


class _EventLogReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        store = ObjectStore(self.options.get("endpoint_url") or None, self.options.get("region") or None)
        for event in events(locate(self.options["root"], store)):
            yield event.row()


def register_event_log(spark: SparkSession, root: Location) -> None:
    """Name the event log of the lakehouse at ``root`` in ``spark`` (``system.event_log`` on the
    lakehouse's drivers); no job runs: the histories are read when the view is."""
    spark.dataSource.register(_EventLogSource)
    reader = spark.read.format(SOURCE_NAME).schema(EVENT_LOG_SCHEMA).option("root", str(root))
    if root.store.endpoint_url:
        reader = reader.option("endpoint_url", root.store.endpoint_url)
    if root.store.region:
        reader = reader.option("region", root.store.region)
    reader.load().createOrReplaceGlobalTempView(EVENT_LOG_VIEW)


__all__ = ["EVENT_LOG_SCHEMA", "EVENT_LOG_VIEW", "Event", "events", "register_event_log"]
