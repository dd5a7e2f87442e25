"""``lakehouse reset TABLE``: a full refresh of one table, from the command line.

Deletes what the Dagster ``full_refresh`` run config deletes (the same function does it):
the table, its query's checkpoint and its stored schema, so the next materialization
rebuilds the table from its source.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import TableName, table_name
from lakehouse_assets.cli.errors import EXIT_FAILURE, EXIT_OK, CommandError, UsageError
from lakehouse_assets.settings import LakehouseSettings

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DESCRIPTION = """\
Full refresh of TABLE (layer.name): delete the table, the checkpoint of the streaming query
that writes it, and its stored schema, so that the next materialization rebuilds it from its
source. Asks for confirmation (y/N) unless --yes is given; without a terminal to ask on, it
refuses (exit 2) unless --yes is given.

Tables that stream from TABLE keep checkpoints that point at versions of the deleted table:
reset them too. They are listed when the project's asset graph can be loaded.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``reset``."""
    parser = subparsers.add_parser(
        "reset", parents=parents, help="full refresh: delete a table, its checkpoint and schema",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", metavar="TABLE", type=table_name,
                        help="the table as layer.name, e.g. silver.recordings_enriched")
    parser.add_argument("-y", "--yes", action="store_true",
                        help="do not ask for confirmation (needed when not run from a terminal)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
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
    if not args.yes and not _confirm(f"Reset {table}? [y/N] "):
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


def _confirm(prompt: str) -> bool:
    # The prompt goes to stderr so stdout stays the command's report.
    print(prompt, end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in {"y", "yes"}


def _downstream_warning(settings: LakehouseSettings, table: TableName) -> str | None:
    """A warning naming the tables that stream from ``table``, or why they are not known."""
    try:
        downstream = streaming_downstream_of_defs(settings, table)
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


def streaming_downstream_of_defs(settings: LakehouseSettings, table: TableName) -> list[str] | None:
    """The tables that stream from ``table``, directly or through others, according to the
    project's Definitions; None if ``table`` is not one of its assets."""
    with warnings.catch_warnings():
        # Loading the graph may warn about Dagster or Spark matters unrelated to a reset.
        warnings.simplefilter("ignore")
        from lakehouse_assets.assets.discovery import streaming_downstream
        from lakehouse_assets.definitions import project_definitions

        return streaming_downstream(project_definitions(settings).assets or (), str(table))

