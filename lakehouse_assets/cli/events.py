"""``lakehouse events [--table T] [--run R]``: what each micro-batch of each table did, from
the event log (``system.event_log``)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli.arguments import positive_int, table_name
from lakehouse_assets.cli.errors import EXIT_OK
from lakehouse_assets.cli.output import format_time, print_json, render_table
from lakehouse_assets.settings import LakehouseSettings

if TYPE_CHECKING:
    from lakehouse_assets.storage.event_log import BatchEvent

DEFAULT_LIMIT = 50

DESCRIPTION = """\
Show the event log: one row per micro-batch per table (and per batch write), newest last:
the run and query that ran it, the batch, the table version it committed, rows read, written
and quarantined, what each expectation counted, when it started, how long it took, and
whether it committed or failed (with the error). A count of nothing shows 0: EXPECTATIONS
FAILED is 0 for a batch whose rules all passed. "-" is a number that does not
apply (QUARANTINED of a table without a quarantine, EXPECTATIONS FAILED of one without
rules, BATCH of a batch write) or that nobody measured; --json gives it as null. Read from
the log with delta-rs; no Spark is started. The same rows are the table system.event_log for
`lakehouse sql`.
"""

# What the table shows for a value the event does not have (null in the log and the JSON).
_NO_VALUE = "-"
_NUMBERS = ("BATCH", "VERSION", "INPUT", "OUTPUT", "QUARANTINED", "MS")


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``events``."""
    parser = subparsers.add_parser(
        "events", parents=parents, help="what each micro-batch did (the event log)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", metavar="TABLE", type=table_name,
                        help="only this table's batches (layer.name)")
    parser.add_argument("--run", dest="run_id", metavar="RUN_ID", help="only this Dagster run's batches")
    parser.add_argument("--limit", type=positive_int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"show the N newest events (default {DEFAULT_LIMIT})")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, settings: LakehouseSettings) -> int:
    """Print the events asked for."""
    from lakehouse_assets.storage.event_log import event_log_path, read_events

    found = read_events(event_log_path(settings.root),
                        table=str(args.table) if args.table else None, run_id=args.run_id)
    shown = found[-args.limit:]
    if args.json:
        print_json({"events": [dataclasses.asdict(e) for e in shown], "matched": len(found)})
        return EXIT_OK
    if not found:
        print("No events" + (" for the table and run asked" if args.table or args.run_id else
                             ": nothing has been materialized yet"))
        return EXIT_OK
    print(render_table(
        ["RUN", "TABLE", "BATCH", "VERSION", "INPUT", "OUTPUT", "QUARANTINED", "EXPECTATIONS FAILED",
         "STARTED", "MS", "STATUS", "ERROR"],
        [[_shown(value) for value in ((e.run_id or "")[:8], e.table, e.batch_id, e.table_version, e.input_rows,
                                      e.output_rows, e.quarantined_rows, _failed(e),
                                      format_time(e.started_at) if e.started_at else None, e.duration_ms,
                                      e.status, e.error)]
         for e in shown],
        right_align=_NUMBERS))
    if len(found) > len(shown):
        print(f"({len(shown)} newest of {len(found)} events; --limit N shows more)")
    return EXIT_OK


def _failed(event: BatchEvent) -> str | None:
    """The rows of the batch each rule failed (the rules that failed any); "0" when its rules
    counted and none failed; None when no rule counted the batch."""
    if not event.expectations:
        return None
    return ", ".join(f"{x.name}={x.failed}" for x in event.expectations if x.failed) or "0"


def _shown(value: Any) -> Any:
    return _NO_VALUE if value is None else value
