"""``lakehouse status``: every table, landing folder and streaming query under the root, read
with delta-rs alone (no Spark, no Dagster): it answers in a second, even while the pipeline runs."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import add_command
from lakehouse_assets.cli.errors import EXIT_FAILURE, EXIT_OK
from lakehouse_assets.cli.output import format_count, format_time, or_dash, print_json, render_table
from lakehouse_assets.location import Location
from lakehouse_assets.settings import LakehouseSettings

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource
    from lakehouse_assets.storage import DeltaTableStore

DESCRIPTION = """\
Show every table under the lakehouse root with its version, row count (from the Delta log's
statistics) and last update; the files in each landing folder and how many no table has
ingested yet (from the ingestion tables' _source_file column, and the landed files a table
loaded in batch records reading in its commit); and each streaming query's last committed
batch (from the commits of the tables it writes). Exits 1 if a table cannot be read.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``status``."""
    add_command(subparsers, "status", parents, run, "tables, landing files and streaming queries under the root",
                DESCRIPTION, json=True)


@dataclass
class TableState:
    """One table's state as the Delta log tells it."""

    table: str
    path: Location
    version: int | None = None
    rows: int | None = None
    last_updated: dt.datetime | None = None
    last_operation: str | None = None
    source_files: set[str] = field(default_factory=set)
    records_source_files: bool = False
    #: What the table's newest commit records its run reading: landed files by source.
    landed_read: dict[str, set[str]] = field(default_factory=dict)
    #: Its newest streaming batch: the query's id, the batch, the version and when.
    last_batch: dict[str, Any] | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {"table": self.table, "path": str(self.path), "version": self.version,
                "rows": self.rows, "last_updated": self.last_updated,
                "last_operation": self.last_operation, "error": self.error}


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Print the status report; 1 if any table could not be read."""
    settings = lakehouse.settings()
    from lakehouse_assets.storage.discovery import discover_tables

    root = catalog.require_root(settings)
    tables = [_table_state(name, settings, lakehouse.store()) for name in discover_tables(root)]
    landing = _landing_state(root, tables)
    queries = _query_state(root, tables)
    if args.json:
        print_json({"root": str(root),
                    "tables": [t.as_dict() for t in tables],
                    "landing": landing,
                    "queries": queries})
    else:
        _print_report(root, tables, landing, queries)
    return EXIT_FAILURE if any(t.error for t in tables) else EXIT_OK


def _table_state(name: str, settings: LakehouseSettings, store: DeltaTableStore) -> TableState:
    import pyarrow as pa
    import pyarrow.compute as pc

    from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN
    from lakehouse_assets.ingestion.files import local_file_path
    from lakehouse_assets.storage.history import newest_first
    from lakehouse_assets.tables.reading import last_reading

    layer, table_name = name.split(".", 1)
    path = settings.table_path(layer, table_name)
    state = TableState(name, path)
    try:
        snapshot = store.snapshot(str(path))
        state.version = snapshot.version
        state.rows = snapshot.row_count()
        # The store names operations as `history` does (a streaming sink's own name).
        last = store.history(str(path), limit=1)
        if last:
            state.last_updated, state.last_operation = last[0].timestamp, last[0].operation
        batch = next((e for e in newest_first(store, str(path)) if e.batch_id is not None), None)
        if batch is not None:
            state.last_batch = {"query_id": batch.query, "batch": batch.batch_id, "version": batch.version,
                                "committed_at": batch.timestamp}
        reading = last_reading(store, str(path))
        if reading is not None and reading.reading is not None:
            state.landed_read = {source: {line.split("\t", 1)[0] for line in files}
                                 for source, files in reading.reading.landed.items()}
        if SOURCE_FILE_COLUMN in snapshot.column_names():
            state.records_source_files = True
            column = snapshot.to_arrow([SOURCE_FILE_COLUMN]).column(0)
            unique = pc.unique(column.cast(pa.string()))
            state.source_files = {local_file_path(v) for v in unique.to_pylist() if v}
    except Exception as exc:  # noqa: BLE001 - one unreadable table must not hide the others
        state.error = f"cannot read {path}: {exc}"
    return state


def _landing_state(root: Location, tables: list[TableState]) -> list[dict[str, Any]]:
    """Each landing source's files and those no table has ingested, on a disk or a store."""
    from lakehouse_assets.ingestion.files import landed_paths

    ingesting = [t for t in tables if t.records_source_files]
    # Files are named alike in listings and in _source_file (absolute local paths, s3a:// URIs),
    # so files of different sources cannot be confused in one set.
    seen: set[str] = set().union(*(t.source_files for t in ingesting))
    sources = []
    for folder in catalog.landing_sources(root):
        files = landed_paths(folder)
        prefix = str(folder) + "/"
        # A table loaded in batch records the files it read, by their path below the folder.
        loaded = [t for t in tables if folder.name in t.landed_read]
        read = {prefix + name for t in loaded for name in t.landed_read[folder.name]}
        ingested_by = [t.table for t in ingesting if any(f.startswith(prefix) for f in t.source_files)]
        ingested_by += [t.table for t in loaded if t.table not in ingested_by]
        pending = [f for f in files if f not in seen and f not in read]
        sources.append({"source": folder.name, "path": str(folder), "files": len(files),
                        "not_ingested": len(pending), "ingested_by": ingested_by,
                        "not_ingested_files": [f.removeprefix(prefix) for f in pending]})
    return sources


def _query_state(root: Location, tables: list[TableState]) -> list[dict[str, Any]]:
    """Each streaming query (a table with a checkpoint) and the last batch its table committed."""
    batches = {t.table: t.last_batch for t in tables if t.last_batch}
    none = dict.fromkeys(("query_id", "batch", "version", "committed_at"))
    return [{"table": name, **batches.get(name, none)} for name in catalog.queries(root)]


def _print_report(root: Location, tables: list[TableState], landing: list[dict[str, Any]],
                  queries: list[dict[str, Any]]) -> None:
    from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN

    print(f"Lakehouse root: {root}")
    print("\nTables")
    if tables:
        print(render_table(
            ["TABLE", "VERSION", "ROWS", "LAST UPDATE", "OPERATION"],
            [[t.table, or_dash(t.version), "-" if t.error else format_count(t.rows),
              format_time(t.last_updated) if t.last_updated else "-",
              "unreadable (see below)" if t.error else t.last_operation]
             for t in tables],
            right_align={"VERSION", "ROWS"}))
    else:
        print("(none yet: materialize the assets to create them)")
    print("\nLanding")
    if landing:
        print(render_table(
            ["SOURCE", "FILES", "NOT INGESTED", "INGESTED BY"],
            [[s["source"], s["files"], s["not_ingested"], ", ".join(s["ingested_by"]) or "-"]
             for s in landing]))
        if tables and not any(t.records_source_files or t.landed_read for t in tables):
            print(f"(no table has a {SOURCE_FILE_COLUMN} column yet, so every file counts as not ingested)")
    else:
        print("(no landing folders: run `lakehouse land` to land files)")
    print("\nStreaming queries")
    if queries:
        print(render_table(
            ["TABLE", "LAST BATCH", "VERSION", "COMMITTED", "QUERY"],
            [[q["table"], or_dash(q["batch"]), or_dash(q["version"]),
              format_time(q["committed_at"]) if q["committed_at"] else "-", or_dash(q["query_id"])]
             for q in queries],
            right_align={"LAST BATCH", "VERSION"}))
    else:
        print("(none yet: no streaming query has run)")
    for problem in (t.error for t in tables if t.error):
        print(f"lakehouse: error: {problem}", file=sys.stderr)
