"""``lakehouse events [--table T] [--run R]``: what each batch of each table did, from the
event log (``system.event_log``): the tables' own commits, read with delta-rs."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli.arguments import positive_int, table_name
from lakehouse_assets.cli.errors import EXIT_OK
from lakehouse_assets.cli.output import format_time, print_json, render_table

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource
    from lakehouse_assets.tables.event_log import Event

DEFAULT_LIMIT = 50

DESCRIPTION = """\
Show the event log: one row per commit of each table (a micro-batch, a batch write, a merge),
oldest first per table: the run and query that made it, the batch, the table version, rows
written, rows its rules checked and what each failed, when the batch started and how long it
took until its commit. Read from the tables' own commits (Delta's history) with delta-rs; no
Spark is started. "-" is a number the commit does not record (rows checked by a query without
rules, the start of a batch Delta's own streaming sink wrote); --json gives it as null. The
same rows are the view system.event_log for `lakehouse sql`.
"""

# What the table shows for a value the event does not have (null in the JSON).
_NO_VALUE = "-"
_NUMBERS = ("BATCH", "VERSION", "WRITTEN", "CHECKED", "MS")


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``events``."""
    parser = subparsers.add_parser(
        "events", parents=parents, help="what each batch did (the event log)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", metavar="TABLE", type=table_name,
                        help="only this table's commits (layer.name)")
    parser.add_argument("--run", dest="run_id", metavar="RUN_ID", help="only this Dagster run's commits")
    parser.add_argument("--limit", type=positive_int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"show the N newest events (default {DEFAULT_LIMIT})")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Print the events asked for."""
    settings = lakehouse.settings()
    from lakehouse_assets.cli.catalog import require_root, require_table
    from lakehouse_assets.tables.event_log import events

    root = require_root(settings)
    if args.table:
        require_table(settings, args.table)
    found = events(root, table=str(args.table) if args.table else None, run_id=args.run_id)
    found.sort(key=lambda e: e.committed_at)
    shown = found[-args.limit:]
    if args.json:
        print_json({"events": [dataclasses.asdict(e) for e in shown], "matched": len(found)})
        return EXIT_OK
    if not found:
        print("No events" + (" for the table and run asked" if args.table or args.run_id else
                             ": nothing has been materialized yet"))
        return EXIT_OK
    print(render_table(
        ["RUN", "TABLE", "BATCH", "VERSION", "WRITTEN", "CHECKED", "EXPECTATIONS FAILED", "STARTED", "MS",
         "OPERATION"],
        [[_shown(value) for value in ((e.run_id or "")[:8], e.table, e.batch_id, e.version, e.rows_written,
                                      e.rows_checked, _failed(e),
                                      format_time(e.started_at or e.committed_at), e.duration_ms, e.operation)]
         for e in shown],
        right_align=_NUMBERS))
    if len(found) > len(shown):
        print(f"({len(shown)} newest of {len(found)} events; --limit N shows more)")
    return EXIT_OK


def _failed(event: Event) -> str | None:
    """The rows of the batch each rule failed (the rules that failed any); "0" when its rules
    counted and none failed; None when no rule counted the batch."""
    if event.expectations_failed is None:
        return None
    return ", ".join(f"{name}={n}" for name, n in event.expectations_failed.items() if n) or "0"


def _shown(value: Any) -> Any:
    return _NO_VALUE if value is None else value
