"""Landing files and reading bronze tables back, for the ingestion tests."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from lakehouse_assets.ingestion import AutoLoaderOptions, autoload_to_table
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaRsTableStore
from lakehouse_assets.streaming import StreamRun

BOM = b"\xef\xbb\xbf"


def land(folder: Path, name: str, content: str | bytes) -> Path:
    """Land a file atomically, as a well-behaved writer does: written aside, then renamed."""
    target = folder / name
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
    return "file:" + str(path.resolve())


class Bronze:
    """One bronze table of a test lakehouse: where it lands, runs, and reads back."""

    def __init__(self, spark: SparkSession, settings: LakehouseSettings, store: DeltaRsTableStore,
                 name: str = "recordings", source_format: str = "json") -> None:
        self.spark = spark
        self.store = store
        self.source_format = source_format
        self.landing = settings.landing_path(name)
        self.table = str(settings.table_path("bronze", name))
        self.checkpoint = str(settings.checkpoint_path("bronze", name))
        self.schema_location = str(settings.schema_path("bronze", name))

    def land(self, name: str, content: str | bytes) -> Path:
        return land(self.landing, name, content)

    def run(self, options: AutoLoaderOptions | None = None, **kwargs: Any) -> StreamRun:
        return autoload_to_table(
            self.spark,
            data_source=str(self.landing),
            source_format=self.source_format,  # type: ignore[arg-type]
            table_path=self.table,
            checkpoint_directory=self.checkpoint,
            schema_location=self.schema_location,
            options=options,
            store=self.store,
            **kwargs,
        )

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
