"""``lakehouse status``: every table, landing folder and checkpoint under the root.

Read from the Delta logs and folders alone (delta-rs, pyarrow): no Spark, no Dagster, so it
answers in about a second and can be run while the pipeline runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.errors import EXIT_FAILURE, EXIT_OK
from lakehouse_assets.cli.output import format_count, format_time, print_json, render_table
from lakehouse_assets.location import Location
from lakehouse_assets.settings import LakehouseSettings

if TYPE_CHECKING:
    from lakehouse_assets.checkpoints.checkpoint import CheckpointReport

DESCRIPTION = """\
Show every table under the lakehouse root with its version, row count (from the Delta log's
statistics) and last update; the files in each landing folder and how many no table has
ingested yet (from the ingestion tables' _source_file column); and each streaming checkpoint's
last committed batch and last offset. Exits 1 if a table or checkpoint cannot be read.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``status``."""
    parser = subparsers.add_parser(
        "status", parents=parents, help="tables, landing files and checkpoints under the root",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(run=run)


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
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {"table": self.table, "path": str(self.path), "version": self.version,
                "rows": self.rows, "last_updated": self.last_updated,
                "last_operation": self.last_operation, "error": self.error}


def run(args: argparse.Namespace, settings: LakehouseSettings) -> int:
    """Print the status report; 1 if any table or checkpoint could not be read."""
    from lakehouse_assets.storage.discovery import discover_tables

    root = catalog.require_root(settings)
    tables = [_table_state(name, settings) for name in discover_tables(root)]
    landing = _landing_state(root, tables)
    checkpoints = list(catalog.checkpoints(root))
    if args.json:
        print_json({"root": str(root),
                    "tables": [t.as_dict() for t in tables],
                    "landing": landing,
                    "checkpoints": [c.as_dict() for c in checkpoints]})
    else:
        _print_report(root, tables, landing, checkpoints)
    failed = any(t.error for t in tables) or any(c.error for c in checkpoints)
    return EXIT_FAILURE if failed else EXIT_OK


def _table_state(name: str, settings: LakehouseSettings) -> TableState:
    import pyarrow as pa
    import pyarrow.compute as pc

    from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN
    from lakehouse_assets.ingestion.files import local_file_path
    from lakehouse_assets.storage import lakehouse_store

    layer, table_name = name.split(".", 1)
    path = settings.table_path(layer, table_name)
    state = TableState(name, path)
    store = lakehouse_store(settings)
    try:
        snapshot = store.snapshot(str(path))
        state.version = snapshot.version
        state.rows = snapshot.row_count()
        # The store names operations as `history` does (a streaming sink's own name).
        last = store.history(str(path), limit=1)
        if last:
            state.last_updated, state.last_operation = last[0].timestamp, last[0].operation
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
        ingested_by = [t.table for t in ingesting if any(f.startswith(prefix) for f in t.source_files)]
        pending = [f for f in files if f not in seen]
        sources.append({"source": folder.name, "path": str(folder), "files": len(files),
                        "not_ingested": len(pending), "ingested_by": ingested_by,
                        "not_ingested_files": [f.removeprefix(prefix) for f in pending]})
    return sources


def _print_report(root: Location, tables: list[TableState], landing: list[dict[str, Any]],
                  checkpoints: list[CheckpointReport]) -> None:
    from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN

    print(f"Lakehouse root: {root}")
    print("\nTables")
    if tables:
        print(render_table(
            ["TABLE", "VERSION", "ROWS", "LAST UPDATE", "OPERATION"],
            [[t.table, _or_dash(t.version), "-" if t.error else format_count(t.rows),
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
        if tables and not any(t.records_source_files for t in tables):
            print(f"(no table has a {SOURCE_FILE_COLUMN} column yet, so every file counts as not ingested)")
    else:
        print("(no landing folders: run `lakehouse land` to land files)")
    print("\nCheckpoints")
    if checkpoints:
        rows = [c.as_dict() for c in checkpoints]
        print(render_table(
            ["TABLE", "COMMITTED BATCH", "LAST OFFSET BATCH", "PENDING BATCH", "LAST OFFSET"],
            [[c["table"], _or_dash(c["last_committed_batch"]), _or_dash(c["last_offset_batch"]),
              _or_dash(c["pending_batch"]), _or_dash(_offsets_text(c["last_offsets"]))]
             for c in rows],
            right_align={"COMMITTED BATCH", "LAST OFFSET BATCH", "PENDING BATCH"}))
    else:
        print("(none yet: no streaming query has run)")
    problems = [t.error for t in tables if t.error] + [f"checkpoint of {c.table}: {c.error}"
                                                        for c in checkpoints if c.error]
    for problem in problems:
        print(f"lakehouse: error: {problem}", file=sys.stderr)


def _or_dash(value: Any) -> Any:
    # In the report "-" means "none"; NULL is kept for missing values in table data.
    return "-" if value is None else value


def _offsets_text(offsets: list[Any] | None) -> Any:
    if offsets is None:
        return None
    # One source is the common case: show its offset itself, not a one-element list.
    return offsets[0] if len(offsets) == 1 else list(offsets)
