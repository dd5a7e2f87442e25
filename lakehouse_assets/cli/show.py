"""``lakehouse show TABLE``: a table's rows, at its latest or an earlier version.

Read with delta-rs and pyarrow, not Spark: looking at a table should not start a JVM, and
only the first rows are read.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import TableName, non_negative_int, positive_int, table_name
from lakehouse_assets.cli.errors import EXIT_OK, CommandError
from lakehouse_assets.cli.output import format_count, print_json, render_table
from lakehouse_assets.location import Location

if TYPE_CHECKING:
    import pyarrow as pa

    from lakehouse_assets.resource import LakehouseResource
    from lakehouse_assets.storage import DeltaTableStore

DEFAULT_LIMIT = 20

DESCRIPTION = """\
Show the first rows of TABLE (layer.name) as a table, or as JSON with --json. --version V
shows the table as it was at version V (time travel; see `lakehouse history TABLE` for the
versions). Missing values show as NULL, times as UTC. Rows come in storage order.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``show``."""
    parser = subparsers.add_parser(
        "show", parents=parents, help="a table's rows, at any version",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", metavar="TABLE", type=table_name,
                        help="the table as layer.name, e.g. gold.daily_patient_avg")
    parser.add_argument("--version", type=non_negative_int, metavar="V",
                        help="show version V instead of the latest")
    parser.add_argument("--limit", type=positive_int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"show at most N rows (default {DEFAULT_LIMIT})")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Print the rows."""
    settings = lakehouse.settings()
    path = catalog.require_table(settings, args.table)
    with catalog.reading(args.table, path):
        rows, total, version, latest = _read(args.table, path, args.version, args.limit, lakehouse.store())
    records = rows.to_pylist()
    if args.json:
        print_json({"table": str(args.table), "path": str(path), "version": version,
                    "latest_version": latest, "total_rows": total, "columns": rows.column_names,
                    "rows": records})
        return EXIT_OK
    print(render_table(rows.column_names, [[r[c] for c in rows.column_names] for r in records]))
    at = f"version {version}" + (" (latest)" if version == latest else f" of 0..{latest}")
    print(f"({len(records)} of {format_count(total)} rows of {args.table} at {at})")
    return EXIT_OK


def _read(name: TableName, path: Location, version: int | None, limit: int,
          store: DeltaTableStore) -> tuple[pa.Table, int | None, int, int]:
    """The first ``limit`` rows at ``version`` (default: the latest), the version's row
    count, the version read and the latest version."""
    snapshot = store.snapshot(str(path))
    latest = snapshot.version
    wanted = latest if version is None else version
    if wanted > latest:
        raise CommandError(
            f"{name} has no version {wanted}: its versions run from 0 to {latest}. "
            f"See `lakehouse history {name}` for what each version holds.")
    if wanted != latest:
        snapshot = store.snapshot(str(path), version=wanted)
    return snapshot.to_arrow(limit=limit), snapshot.row_count(), wanted, latest
