"""``lakehouse repair TABLE``: rebuild a streaming checkpoint from what its tables hold.

The way out of a damaged checkpoint, or one that is ahead of or behind its table, without a
full refresh: see :mod:`lakehouse_assets.checkpoints.repair`.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import TableName, table_name
from lakehouse_assets.cli.errors import EXIT_FAILURE, EXIT_OK, CommandError
from lakehouse_assets.settings import LakehouseSettings

DESCRIPTION = """\
Check the checkpoint of the streaming query that writes TABLE (layer.name) against the
Delta tables it writes and, when it is damaged or disagrees with them, rebuild it from what
the tables hold: each batch's commit records the query's id and the batch number, its
commit or the event log the batch's source offsets. The next materialization then resumes
after the last batch the tables hold, without a full refresh, and nothing is read twice or
skipped.

A stateful query (a complete-mode aggregation, e.g. gold) keeps state that no table holds:
its checkpoint is restarted instead, and the next run reads its source from the start and
replaces the table's contents (nothing is duplicated).

The old checkpoint is never deleted: it is moved to .<name>.damaged-<time> beside it.
With --check, only report whether the checkpoint is sound (exit 0) or not (exit 1).
"""

# A repair must not race a run writing the same tables; it does not wait long for one.
LOCK_TIMEOUT_SECONDS = 10.0


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``repair``."""
    parser = subparsers.add_parser(
        "repair", parents=parents, help="rebuild a damaged streaming checkpoint from its Delta tables",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", metavar="TABLE", type=table_name,
                        help="the table as layer.name, e.g. silver.recordings_enriched")
    parser.add_argument("--check", action="store_true", help="only check the checkpoint; change nothing")
    parser.add_argument("--force", action="store_true",
                        help="rebuild the checkpoint even when it is sound and agrees with its tables")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, settings: LakehouseSettings) -> int:
    """Check, then repair when needed; 1 when --check finds a problem."""
    from lakehouse_assets.checkpoints.checkpoint import Checkpoint
    from lakehouse_assets.checkpoints.repair import tables_written_by
    from lakehouse_assets.errors import LakehouseError
    from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN
    from lakehouse_assets.storage import lakehouse_store
    from lakehouse_assets.storage.event_log import event_log_path, logged_offsets
    from lakehouse_assets.storage.table_lock import table_locks

    table: TableName = args.table
    root = catalog.require_root(settings)
    checkpoint = settings.checkpoint_path(table.layer, table.name)
    model = Checkpoint(str(checkpoint), str(table))
    main = settings.table_path(table.layer, table.name)
    store = lakehouse_store(settings)
    if not checkpoint.exists() and not store.exists(str(main)):
        raise CommandError(
            f"Nothing to repair for {table}: no checkpoint at {checkpoint} and no table at {main}. "
            f"{catalog.describe_known_tables(root, str(table))}")
    try:
        query_id = model.query_id()
    except LakehouseError:
        query_id = None  # damaged: then only the table of its own name is rebuilt against
    from lakehouse_assets.storage.discovery import discover_tables

    others = [f"{layer_name}" for layer_name in discover_tables(root) if layer_name != str(table)]
    paths = {str(table): str(main)}
    paths.update(tables_written_by(
        store, {name: str(settings.table_path(*name.split("."))) for name in others}, str(main), query_id))

    with table_locks(root, list(paths), timeout_seconds=LOCK_TIMEOUT_SECONDS, holder=f"lakehouse repair {table}"):
        problem = None
        try:
            model.validate(list(paths.values()), store)
        except LakehouseError as exc:
            problem = str(exc)
        if args.check:
            if problem:
                print(problem)
                return EXIT_FAILURE
            print(f"The checkpoint of {table} ({checkpoint}) is sound and agrees with {', '.join(paths)}.")
            return EXIT_OK
        if problem is None and not args.force:
            print(f"The checkpoint of {table} ({checkpoint}) is sound and agrees with {', '.join(paths)}: "
                  "nothing to repair (--force rebuilds it anyway).")
            return EXIT_OK
        if problem:
            print(f"Found: {problem}\n")
        result = model.repair(store, list(paths.values()), source_file_column=SOURCE_FILE_COLUMN,
                              logged_offsets=logged_offsets(event_log_path(root), str(table)))

    kept = f"The old checkpoint is kept at {result.moved_to}." if result.moved_to else "There was no old checkpoint."
    if result.kind == "resumed":
        replay = (f" Batch {result.replays_batch} is planned and not done: the next run replays it, and each "
                  "table that already holds it skips it." if result.replays_batch is not None else "")
        print(f"Repaired the checkpoint of {table} from {', '.join(paths)}: query {result.query_id} "
              f"stands after batch {result.last_batch}, as the tables hold.{replay} {kept} "
              "The next materialization resumes from there.")
    else:
        print(f"Restarted the checkpoint of {table}: {result.reason}. {kept} "
              "The next materialization reads its source from the start.")
    return EXIT_OK
