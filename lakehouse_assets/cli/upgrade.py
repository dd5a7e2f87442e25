"""``lakehouse upgrade``: bring a lakehouse an older release built up to what this one reads.

See :mod:`lakehouse_assets.storage.checkpoint_upgrade` for what is converted and why.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.errors import EXIT_FAILURE, EXIT_OK
from lakehouse_assets.settings import CHECKPOINTS_DIR, LakehouseSettings

DESCRIPTION = """\
Convert what an older release of lakehouse_assets left in the lakehouse to what this one
reads. Today that is the streaming checkpoints of the tables that stream from a Delta table
(silver, gold): releases before Delta Lake's connector read those tables with a source of
their own, whose positions Delta's streaming source cannot resume from. Each position
becomes Delta's, for the same rows: nothing is read again and nothing skipped. Run it once,
with no run in progress (it takes the tables' locks). Converting twice changes nothing.

With --check, only list the checkpoints that need converting (exit 1 when any does).
"""

# Runs hold a table's lock for as long as they write it: do not wait for one for long.
LOCK_TIMEOUT_SECONDS = 10.0


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``upgrade``."""
    parser = subparsers.add_parser(
        "upgrade", parents=parents, help="convert checkpoints an older release wrote to Delta's offsets",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only list what needs converting; change nothing")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, settings: LakehouseSettings) -> int:
    """Convert (or with --check, list) every legacy checkpoint of the lakehouse."""
    from lakehouse_assets.storage.checkpoint_upgrade import checkpoints_under, needs_upgrade, upgrade_checkpoint
    from lakehouse_assets.storage.table_lock import table_locks

    root = catalog.require_root(settings)
    folder = root / CHECKPOINTS_DIR

    pending = {str(path.relative_to(folder)).replace("/", "."): str(path)
               for path in checkpoints_under(folder) if needs_upgrade(str(path))}
    if not pending:
        print(f"Nothing to upgrade in {root}: every checkpoint already has Delta's offsets.")
        return EXIT_OK
    if args.check:
        for name, location in sorted(pending.items()):
            print(f"{name}: checkpoint {location} has positions of the old Delta source")
        print(f"{len(pending)} checkpoint(s) to convert: run `lakehouse upgrade`.")
        return EXIT_FAILURE
    with table_locks(root, sorted(pending), timeout_seconds=LOCK_TIMEOUT_SECONDS, holder="lakehouse upgrade"):
        for name, location in sorted(pending.items()):
            result = upgrade_checkpoint(location)
            print(f"{name}: converted the offsets of batch(es) {', '.join(map(str, result.batches_converted))}")
    print(f"Upgraded {len(pending)} checkpoint(s) in {root}.")
    return EXIT_OK
