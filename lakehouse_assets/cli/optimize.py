"""``lakehouse optimize TABLE``: compact a table's small files, optionally Z-ordered.

Delta Lake's OPTIMIZE commits with ``dataChange=false``: streams reading the table skip it and read
no row twice (see :mod:`lakehouse_assets.storage.maintenance`). It waits for a run writing
the table to finish (the table's lock) rather than racing it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import positive_int, table_name
from lakehouse_assets.cli.errors import EXIT_OK, CommandError
from lakehouse_assets.cli.output import format_count, print_json, render_table

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DESCRIPTION = """\
Compact TABLE (layer.name), or every table with --all, with Delta Lake's OPTIMIZE: bin-pack
its small data files into files of at most --target-size bytes (default 1 GB, Delta's
spark.databricks.delta.optimize.maxFileSize), in one commit that changes no rows
(dataChange=false), so streams reading the table skip it. With --z-order, rewrite the files
clustered by those columns (ZORDER BY), so that queries filtering on them read fewer files.
Runs in a Spark session (the engine's, when LAKEHOUSE_SPARK_REMOTE names one).

Waits for a run writing the table to finish first. The files compacted away stay on disk
(time travel still reads them) until `lakehouse vacuum` deletes them.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``optimize``."""
    parser = subparsers.add_parser(
        "optimize", parents=parents, help="compact a table's small files (OPTIMIZE), optionally Z-ordered",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", metavar="TABLE", type=table_name, nargs="?",
                        help="the table as layer.name, e.g. silver.recordings_enriched")
    parser.add_argument("--all", action="store_true", dest="every", help="compact every table under the root")
    parser.add_argument("--z-order", metavar="COL", nargs="+", default=None,
                        help="cluster the rewritten files by these columns")
    parser.add_argument("--target-size", metavar="BYTES", type=positive_int, default=None,
                        help="the size compacted files aim at, in bytes")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(run=run, spark=True)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Compact the tables; 1 when one of them failed (the others are still compacted)."""
    settings = lakehouse.settings()
    from lakehouse_assets.errors import LakehouseError
    from lakehouse_assets.tables.maintenance import TableMaintenance

    names = catalog.selected_tables(settings, args.table, args.every)
    spark = lakehouse.spark_session
    maintenance = TableMaintenance(spark, settings, None, lakehouse.store(), holder="lakehouse optimize")
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    targets = [target for table in names for target in maintenance.targets(table)]
    for name in targets:
        try:
            # Z-order columns are the table's; its state tables are only compacted.
            z_order = None if "/" in name else args.z_order
            result = maintenance.optimize(name, z_order=z_order, target_size=args.target_size)
        except LakehouseError as exc:
            if not args.every:
                raise
            failures.append(f"{name}: {exc}")
            continue
        rows.append({"table": name, "version": result.version, "files_removed": result.files_removed,
                     "files_added": result.files_added, "bytes_removed": result.bytes_removed,
                     "bytes_added": result.bytes_added, "z_order": list(result.z_order)})
    if args.json:
        print_json({"optimized": rows, "failed": failures})
    else:
        print(render_table(
            ["TABLE", "VERSION", "FILES REMOVED", "FILES ADDED", "BYTES REMOVED", "BYTES ADDED"],
            [[r["table"], r["version"] if r["version"] is not None else "nothing to compact",
              r["files_removed"], r["files_added"], format_count(r["bytes_removed"]),
              format_count(r["bytes_added"])] for r in rows],
            right_align=("BYTES REMOVED", "BYTES ADDED")))
    if failures:
        raise CommandError(f"{len(failures)} of {len(targets)} tables were not compacted:\n  " + "\n  ".join(failures))
    return EXIT_OK
