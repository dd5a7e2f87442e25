"""``lakehouse quarantine replay TABLE``: give a routed table's quarantined rows a second chance."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli.arguments import table_name
from lakehouse_assets.cli.errors import EXIT_OK, CommandError
from lakehouse_assets.cli.output import print_json

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DESCRIPTION = """\
Re-evaluate the quarantined rows of TABLE (a routed table, layer.name, e.g.
silver.recordings_enriched) against its rules and lookups as they are now, and move the rows
that now pass into TABLE, exactly once: after fixing a rule, or landing the patients a
recording was waiting for. Rows that still fail stay quarantined. Safe to run again, and to
run again after a crash (it finishes the replay the crash cut short first). Starts Spark
(embedded, or the engine at LAKEHOUSE_SPARK_REMOTE).
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``quarantine`` and its ``replay``."""
    parser = subparsers.add_parser("quarantine", parents=parents, help="work with a table's quarantine",
                                   description="Work with a routed table's quarantine.")
    actions = parser.add_subparsers(title="actions", metavar="ACTION", dest="action", required=True)
    replay = actions.add_parser("replay", parents=parents, help="move rows that now pass into the table",
                                description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    replay.add_argument("table", metavar="TABLE", type=table_name,
                        help="the routed table as layer.name, e.g. silver.recordings_enriched")
    replay.add_argument("--json", action="store_true", help="print machine-readable JSON")
    replay.set_defaults(run=run, spark=True)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Replay the quarantine of the table asked for."""
    settings = lakehouse.settings()
    import dataclasses

    from lakehouse_assets.definitions import project_definitions
    from lakehouse_assets.io.replay import replay_quarantine, routed_table_assets

    routed = routed_table_assets(list(project_definitions(settings).assets or []))
    asset = routed.get(str(args.table))
    if asset is None:
        raise CommandError(f"{args.table} is not a routed table, so it has no quarantine to replay; routed tables: "
                           f"{', '.join(sorted(routed)) or 'none'}")
    spark = lakehouse.spark_session
    result = replay_quarantine(asset, spark, settings, lakehouse.store())
    if args.json:
        print_json(dataclasses.asdict(result))
        return EXIT_OK
    if result.finished_earlier is not None:
        print(f"Finished replay {result.finished_earlier}, which a crash had cut short.")
    if result.replay is None:
        print(f"No quarantined row of {result.table} passes now; {result.still_quarantined} stay quarantined.")
    else:
        print(f"Replay {result.replay}: moved {result.moved} rows into {result.table}; "
              f"{result.still_quarantined} stay quarantined.")
    return EXIT_OK
