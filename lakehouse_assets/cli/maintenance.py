"""The commands that look after tables: ``reset`` (a full refresh, by the function the Dagster
``full_refresh`` run config calls), and ``optimize`` and ``vacuum`` (Delta Lake's OPTIMIZE and VACUUM
by :class:`lakehouse_assets.tables.maintenance.TableMaintenance`, which holds each table's lock, so a
run writing it finishes first, and refuses a VACUUM of files a stream has yet to read)."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import TableName, add_command, non_negative_int, positive_int
from lakehouse_assets.cli.errors import EXIT_FAILURE, EXIT_OK, CommandError, UsageError
from lakehouse_assets.cli.output import format_count, print_json, render_table
from lakehouse_assets.settings import LakehouseSettings

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource
    from lakehouse_assets.tables.maintenance import TableMaintenance

DEFAULT_RETAIN_HOURS = 168

RESET = """\
Full refresh of TABLE (layer.name): delete the table, the checkpoint of the streaming query
that writes it, and its stored schema, so that the next materialization rebuilds it from its
source. Asks for confirmation (y/N) unless --yes is given; without a terminal to ask on, it
refuses (exit 2) unless --yes is given.

Tables that stream from TABLE keep checkpoints that point at versions of the deleted table:
reset them too. They are listed when the project's asset graph can be loaded.
"""

OPTIMIZE = """\
Compact TABLE (layer.name), or every table with --all, with Delta Lake's OPTIMIZE: bin-pack
its small data files into files of at most --target-size bytes (default 1 GB, Delta's
spark.databricks.delta.optimize.maxFileSize), in one commit that changes no rows
(dataChange=false), so streams reading the table skip it. With --z-order, rewrite the files
clustered by those columns (ZORDER BY), so that queries filtering on them read fewer files.
Runs in a Spark session (the engine's, when LAKEHOUSE_SPARK_REMOTE names one).

Waits for a run writing the table to finish first. The files compacted away stay on disk
(time travel still reads them) until `lakehouse vacuum` deletes them.
"""

VACUUM = f"""\
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
    """Register ``reset``, ``optimize`` and ``vacuum``."""
    reset = add_command(subparsers, "reset", parents, run_reset,
                        "full refresh: delete a table, its checkpoint and schema", RESET, table="TABLE")
    reset.add_argument("-y", "--yes", action="store_true",
                       help="do not ask for confirmation (needed when not run from a terminal)")
    optimize = add_command(subparsers, "optimize", parents, run_optimize,
                           "compact a table's small files (OPTIMIZE), optionally Z-ordered", OPTIMIZE,
                           spark=True, table="TABLE?", json=True)
    optimize.add_argument("--all", action="store_true", dest="every", help="compact every table under the root")
    optimize.add_argument("--z-order", metavar="COL", nargs="+", help="cluster the rewritten files by these columns")
    optimize.add_argument("--target-size", metavar="BYTES", type=positive_int,
                          help="the size compacted files aim at, in bytes")
    vacuum = add_command(subparsers, "vacuum", parents, run_vacuum, "delete files a table no longer lists (VACUUM)",
                         VACUUM, spark=True, table="TABLE?", json=True)
    vacuum.add_argument("--all", action="store_true", dest="every", help="vacuum every table under the root")
    vacuum.add_argument("--retain-hours", metavar="N", type=non_negative_int, default=DEFAULT_RETAIN_HOURS,
                        help=f"keep files removed less than N hours ago (default {DEFAULT_RETAIN_HOURS})")
    vacuum.add_argument("--dry-run", action="store_true", help="list the files that would be deleted; delete none")


def run_reset(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Reset the table after confirmation; 1 if declined or nothing was there."""
    settings = lakehouse.settings()
    table: TableName = args.table
    root = catalog.require_root(settings)
    targets = {
        "table": settings.table_path(table.layer, table.name),
        "checkpoint": settings.checkpoint_path(table.layer, table.name),
        "stored schema": settings.schema_path(table.layer, table.name),
    }
    present = {what: path for what, path in targets.items() if path.exists()}
    if not present:
        raise CommandError(
            f"Nothing to reset for {table}: no table at {targets['table']}, no checkpoint at "
            f"{targets['checkpoint']}, no stored schema at {targets['stored schema']}. "
            f"{catalog.describe_known_tables(root, str(table))}")
    if not args.yes and not sys.stdin.isatty():
        # A script must say what it means: a reset deletes data that may take hours to rebuild.
        raise UsageError(
            f"Refusing to reset {table} without confirmation: there is no terminal to ask on. "
            f"Pass --yes to reset it: lakehouse reset {table} --yes")

    print(f"Resetting {table} deletes:")
    for what, path in present.items():
        print(f"  {what:<14} {path}")
    downstream = _downstream_warning(settings, table)
    if downstream:
        print(downstream, file=sys.stderr)
    if not args.yes:
        # The prompt goes to stderr so stdout stays the command's report.
        print(f"Reset {table}? [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in {"y", "yes"}:
            print("Not reset: nothing was deleted.", file=sys.stderr)
            return EXIT_FAILURE

    from lakehouse_assets.io import TableRef, full_refresh

    full_refresh(lakehouse.store(), TableRef(
        table.layer, table.name, targets["table"], targets["checkpoint"], targets["stored schema"]))
    # full_refresh ignores errors deleting the checkpoint and schema: check nothing is left,
    # since a stale checkpoint against a new table would skip or repeat data silently.
    left = [f"{what} {path}" for what, path in present.items() if path.exists()]
    if left:
        raise CommandError(
            f"Reset of {table} is incomplete: could not delete {', '.join(left)}. Check its "
            "permissions, delete it by hand, then run the reset again.")
    print(f"Reset {table}: the next materialization rebuilds it from its source.")
    return EXIT_OK


def _downstream_warning(settings: LakehouseSettings, table: TableName) -> str | None:
    """A warning naming the tables that stream from ``table``, or why they are not known."""
    try:
        with warnings.catch_warnings():
            # Loading the graph may warn about Dagster or Spark matters unrelated to a reset.
            warnings.simplefilter("ignore")
            from lakehouse_assets.assets.discovery import streaming_downstream
            from lakehouse_assets.definitions import project_definitions

            downstream = streaming_downstream(project_definitions(settings).assets or (), str(table))
    except Exception as exc:  # noqa: BLE001 - the graph is optional here; the reset is not
        return (f"Note: could not load the asset graph to list the tables that stream from "
                f"{table} ({type(exc).__name__}: {exc}). Reset those tables too.")
    if downstream is None:
        return f"Note: {table} is not an asset of the project's graph; no downstream tables are known."
    if not downstream:
        return None
    listed = ", ".join(downstream)
    return (f"Warning: {listed} stream{'s' if len(downstream) == 1 else ''} from {table}; their "
            f"checkpoints point at versions of the table being deleted. Reset "
            f"{'it' if len(downstream) == 1 else 'them'} too, e.g. lakehouse reset {downstream[0]} --yes")


def run_optimize(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Compact the tables; 1 when one of them failed (the others are still compacted)."""

    def optimize(maintenance: TableMaintenance, name: str) -> dict[str, Any]:
        # Z-order columns are the table's; its state tables are only compacted.
        result = maintenance.optimize(name, z_order=None if "/" in name else args.z_order,
                                      target_size=args.target_size)
        return {"table": name, "version": result.version, "files_removed": result.files_removed,
                "files_added": result.files_added, "bytes_removed": result.bytes_removed,
                "bytes_added": result.bytes_added, "z_order": list(result.z_order)}

    def report(rows: list[dict[str, Any]]) -> None:
        print(render_table(
            ["TABLE", "VERSION", "FILES REMOVED", "FILES ADDED", "BYTES REMOVED", "BYTES ADDED"],
            [[r["table"], r["version"] if r["version"] is not None else "nothing to compact",
              r["files_removed"], r["files_added"], format_count(r["bytes_removed"]),
              format_count(r["bytes_added"])] for r in rows],
            right_align=("BYTES REMOVED", "BYTES ADDED")))

    return _maintain(args, lakehouse, optimize, report, key="optimized", verb="compacted")


def run_vacuum(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Vacuum the tables; 1 when one of them was refused or failed (the others are vacuumed)."""

    def vacuum(maintenance: TableMaintenance, name: str) -> dict[str, Any]:
        result = maintenance.vacuum(name, retention=dt.timedelta(hours=args.retain_hours), dry_run=args.dry_run)
        return {"table": name, "dry_run": result.dry_run, "retain_hours": args.retain_hours,
                "files": list(result.files), "bytes": result.bytes,
                "readers": [{"table": r.name, "checkpoint": r.checkpoint, "read_to_version": r.version}
                            for r in result.readers]}

    def report(rows: list[dict[str, Any]]) -> None:
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

    return _maintain(args, lakehouse, vacuum, report, key="vacuumed", verb="vacuumed", readers=True)


def _maintain(args: argparse.Namespace, lakehouse: LakehouseResource,
              act: Callable[[TableMaintenance, str], dict[str, Any]], report: Callable[[list[dict[str, Any]]], None],
              *, key: str, verb: str, readers: bool = False) -> int:
    """``act`` on TABLE or, with --all, every table (and the state tables inside each), then print
    what it returned (``report``, or JSON under ``key``); with --all, a table that fails does not
    stop the others. ``readers``: ``act`` needs the streams' positions, which Dagster knows."""
    from lakehouse_assets.errors import LakehouseError
    from lakehouse_assets.tables.maintenance import TableMaintenance

    settings = lakehouse.settings()
    names = catalog.selected_tables(settings, args.table, args.every)
    instance = None
    if readers and settings.dagster_home:
        import dagster as dg

        instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
    maintenance = TableMaintenance(lakehouse.spark_session, settings, instance, lakehouse.store(),
                                   holder=f"lakehouse {args.command}")
    targets = [target for table in names for target in maintenance.targets(table)]
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    for name in targets:
        try:
            rows.append(act(maintenance, name))
        except LakehouseError as exc:
            if not args.every:
                raise
            failures.append(f"{name}: {exc}")
    if args.json:
        print_json({key: rows, "failed": failures})
    else:
        report(rows)
    if failures:
        raise CommandError(f"{len(failures)} of {len(targets)} tables were not {verb}:\n  " + "\n  ".join(failures))
    return EXIT_OK
