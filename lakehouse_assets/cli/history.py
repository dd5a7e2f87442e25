"""``lakehouse history TABLE``: the table's commits, newest first, like DESCRIBE HISTORY."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import positive_int, table_name
from lakehouse_assets.cli.errors import EXIT_OK
from lakehouse_assets.cli.output import format_time, print_json, render_table

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DEFAULT_LIMIT = 20
# Where writers other than the project's sink put their row counts: delta-rs writes, Spark writes.
_ROW_METRICS = ("num_added_rows", "numOutputRows")

DESCRIPTION = """\
Show the commits of TABLE (layer.name), newest first, like Delta's DESCRIBE HISTORY: version,
time, operation, rows written, and for streaming writes the query and micro-batch that wrote
the version. Read from the Delta log; no Spark is started.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``history``."""
    parser = subparsers.add_parser(
        "history", parents=parents, help="a table's commits, newest first",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", metavar="TABLE", type=table_name,
                        help="the table as layer.name, e.g. silver.recordings_enriched")
    parser.add_argument("--limit", type=positive_int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"show the N newest versions (default {DEFAULT_LIMIT})")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Print the table's history."""
    settings = lakehouse.settings()

    path = catalog.require_table(settings, args.table)
    store = lakehouse.store()
    with catalog.reading(args.table, path):
        entries = store.history(str(path), limit=args.limit)
        latest = store.version(str(path))
    rows: list[dict[str, Any]] = [{"version": e.version, "timestamp": e.timestamp, "operation": e.operation,
             "rows_written": _rows_written(e.rows_written, e.metrics), "query": e.query,
             "batch_id": e.batch_id, "parameters": dict(e.parameters),
             "metrics": dict(e.metrics)} for e in entries]
    if args.json:
        print_json({"table": str(args.table), "path": str(path), "history": rows})
        return EXIT_OK
    print(render_table(
        ["VERSION", "TIMESTAMP", "OPERATION", "ROWS WRITTEN", "QUERY", "BATCH", "PARAMETERS"],
        [[r["version"], format_time(r["timestamp"]), r["operation"], r["rows_written"],
          r["query"], r["batch_id"], r["parameters"] or None] for r in rows]))
    if latest is not None and entries and entries[-1].version > 0:
        print(f"({len(entries)} newest of {latest + 1} versions of {args.table}; "
              "--limit N shows more)")
    return EXIT_OK


def _rows_written(recorded: int | None, metrics: dict[str, Any] | Any) -> int | None:
    if recorded is not None:
        return recorded
    for key in _ROW_METRICS:
        value = metrics.get(key)
        if isinstance(value, int):
            return value
    return None
