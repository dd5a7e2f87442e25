"""Landing files and reading bronze tables back, for the ingestion tests."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.assets.bronze import bronze_loader, bronze_table, landing_source
from lakehouse_assets.assets.table_asset import after_body
from lakehouse_assets.ingestion import AutoLoaderOptions
from lakehouse_assets.io.handlers.ingestion import write_ingestion
from lakehouse_assets.io.table_run import table_run_of
from lakehouse_assets.quality.rules import Rule
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import TableRunConfig, TableSpec
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.streaming import StreamRun

#: The logger a test bronze run reports to, as a Dagster run reports to the run's log.
RUN_LOG = "lakehouse_assets_tests.bronze_run"

BOM = b"\xef\xbb\xbf"


def land(folder: Path, name: str, content: str | bytes) -> Path:
    """Land a file atomically, as a well-behaved writer does: written aside, then renamed."""
    target = Path(folder) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, target)
    return target


def json_lines(records: Iterable[dict[str, Any] | str]) -> str:
    """JSON lines; a string is written as it is (a malformed line)."""
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def recording(i: int, **overrides: Any) -> dict[str, Any]:
    """A heart-rate recording like the course's."""
    return {"device_id": i % 7, "mrn": 10_000_000 + i, "time": 1_577_836_800.0 + i, "heartrate": 60.0 + i % 40, **overrides}


def file_uri(path: Path) -> str:
    """A local file's path as the bronze ``_source_file`` column spells it."""
    return "file:" + str(Path(path).resolve())


class Bronze:
    """One bronze table of a test lakehouse: where it lands, runs, and reads back.

    A run takes the product's path without Dagster's executor around it: the table's
    :func:`~lakehouse_assets.assets.bronze.bronze_table` declaration, its source as the asset
    body makes it, and the IO manager's ingestion handler."""

    def __init__(self, spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore,
                 name: str = "recordings", source_format: str = "json") -> None:
        self.spark = spark
        self.settings = settings
        self.store = store
        self.name = name
        self.source_format = source_format
        self.landing = Path(settings.landing_path(name))
        self.table = str(settings.table_path("bronze", name))
        self.checkpoint = str(settings.checkpoint_path("bronze", name))
        self.schema_location = str(settings.schema_path("bronze", name))

    def land(self, name: str, content: str | bytes) -> Path:
        return land(self.landing, name, content)

    def run(self, options: AutoLoaderOptions | None = None, expectations: Sequence[Rule] = ()) -> StreamRun:
        """Materialize the table once, reading with ``options`` and enforcing ``expectations``
        (none: Delta's own streaming sink writes it); what its query did (no query, an empty
        run, when no readable landed file is new, as the asset starts none)."""
        options = dataclasses.replace(options or AutoLoaderOptions(), format=self.source_format)  # type: ignore[arg-type]
        asset = bronze_table(name=self.name, data_source=self.name, source_format=options.format, options=options,
                             expectations=expectations)
        key = dg.AssetKey(["bronze", self.name])
        run = table_run_of(key, TableSpec.of(asset.metadata_by_key[key]), TableRunConfig(), self.settings)
        loader = bronze_loader(self.settings, self.store, name=self.name, data_source=self.name, options=options)
        log = logging.getLogger(RUN_LOG)
        # What the asset's declaration does with the body's source: its expectations go with it.
        source = dataclasses.replace(landing_source(lambda: self.spark, loader, log), expectations=tuple(expectations))
        if after_body(source) is not None:
            # What the asset does when no readable landed file is new: no query, no commit.
            return StreamRun()
        written = write_ingestion(source, run, self.store, log)
        assert written.query is not None
        return written.query

    def rows(self) -> list[dict[str, Any]]:
        """The table's rows as dicts, read back through the store."""
        return [r.asDict(recursive=True) for r in self.store.read(self.spark, self.table).collect()]

    def count(self) -> int:
        return self.store.read(self.spark, self.table).count()

    def column_types(self) -> dict[str, str]:
        return {f.name: f.dataType.simpleString() for f in self.store.schema(self.table).fields}


def by_source(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["_source_file"], []).append(row)
    return grouped


def rescued(row: dict[str, Any]) -> dict[str, Any] | None:
    """A row's ``_rescued_data`` parsed, or None."""
    return None if row["_rescued_data"] is None else json.loads(row["_rescued_data"])
