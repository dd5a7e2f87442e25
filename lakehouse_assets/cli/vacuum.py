"""``lakehouse vacuum TABLE``: delete the data files a table stopped listing long enough ago.

Refuses, deleting nothing, when a streaming query reading the table has yet to read one of
the files (see :mod:`lakehouse_assets.storage.maintenance`); waits for a run writing the
table to finish (the table's lock) rather than racing it.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import non_negative_int, table_name
from lakehouse_assets.cli.errors import EXIT_OK, CommandError
from lakehouse_assets.cli.output import format_count, print_json, render_table

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DEFAULT_RETAIN_HOURS = 168

DESCRIPTION = f"""\
Delete the data files of TABLE (layer.name), or of every table with --all, that the table
stopped listing more than --retain-hours ago (default {DEFAULT_RETAIN_HOURS}: 7 days), as left by
compactions, overwrites and merges. Time travel to versions older than the retention stops
working. With --dry-run, list the files and delete nothing.

Refuses, deleting nothing, when a streaming query reading the table (any checkpoint under
$LAKEHOUSE_ROOT/_checkpoints) has yet to read one of those files, and says which query and
what retention it needs. How far each query has read is its table's last materialization in
the Dagster instance at DAGSTER_HOME; a query no materialization there accounts for may need
any file, so then nothing is deleted either. Then Delta Lake's VACUUM deletes them, in a
Spark session (the engine's, when LAKEHOUSE_SPARK_REMOTE names one). Delta itself removes the
log's commit files older than the table's delta.logRetentionDuration (30 days) at its log
checkpoints.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``vacuum``."""
    parser = subparsers.add_parser(
        "vacuum", parents=parents, help="delete data files a table no longer lists (VACUUM)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", metavar="TABLE", type=table_name, nargs="?",
                        help="the table as layer.name, e.g. silver.recordings_enriched")
    parser.add_argument("--all", action="store_true", dest="every", help="vacuum every table under the root")
    parser.add_argument("--retain-hours", metavar="N", type=non_negative_int, default=DEFAULT_RETAIN_HOURS,
                        help=f"keep files removed less than N hours ago (default {DEFAULT_RETAIN_HOURS})")
    parser.add_argument("--dry-run", action="store_true", help="list the files that would be deleted; delete none")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(run=run, spark=True)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Vacuum the tables; 1 when one of them was refused or failed (the others are vacuumed)."""
    settings = lakehouse.settings()
    import dagster as dg

    from lakehouse_assets.errors import LakehouseError
    from lakehouse_assets.tables.maintenance import TableMaintenance

    names = catalog.selected_tables(settings, args.table, args.every)
    spark = lakehouse.spark_session
    instance = dg.DagsterInstance.from_config(str(settings.dagster_home)) if settings.dagster_home else None
    maintenance = TableMaintenance(spark, settings, instance, lakehouse.store(), holder="lakehouse vacuum")
    retention = dt.timedelta(hours=args.retain_hours)
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    targets = [target for table in names for target in maintenance.targets(table)]
    for name in targets:
        try:
            result = maintenance.vacuum(name, retention=retention, dry_run=args.dry_run)
        except LakehouseError as exc:
            if not args.every:
                raise
            failures.append(f"{name}: {exc}")
            continue
        rows.append({"table": name, "dry_run": result.dry_run, "retain_hours": args.retain_hours,
                     "files": list(result.files), "bytes": result.bytes,
                     "readers": [{"table": r.name, "checkpoint": r.checkpoint, "read_to_version": r.version}
                                 for r in result.readers]})
    if args.json:
        print_json({"vacuumed": rows, "failed": failures})
    else:
        verb = "WOULD DELETE" if args.dry_run else "DELETED"
        print(render_table(
            ["TABLE", f"FILES {verb}", "BYTES", "STREAM READERS"],
            [[r["table"], len(r["files"]), format_count(r["bytes"]),
              ", ".join(f"{x['table']}@{'?' if x['read_to_version'] is None else x['read_to_version']}"
                        for x in r["readers"]) or "none"] for r in rows],
            right_align=("BYTES",)))
        if args.dry_run:
            for row in rows:
                for name in row["files"]:
                    print(f"{row['table']}: {name}")
    if failures:
        raise CommandError(f"{len(failures)} of {len(targets)} tables were not vacuumed:\n  " + "\n  ".join(failures))
    return EXIT_OK
