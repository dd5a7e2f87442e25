"""The commands over the tables the project declares (its assets, and the packages and pipelines
LAKEHOUSE_ASSET_PACKAGES and LAKEHOUSE_PIPELINES name): ``verify`` (the exactly-once invariants,
judged on the tables as stored, read with delta-rs independently of the code that wrote them),
``quarantine replay`` and ``export-sdp`` (:mod:`lakehouse_assets.pipelines.export`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import add_command
from lakehouse_assets.cli.errors import EXIT_FAILURE, EXIT_OK, CommandError
from lakehouse_assets.cli.output import print_json, render_table

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

VERIFY = """\
Check that nothing was lost, duplicated or half-written:

  landed_once        every landed record is in its bronze table exactly once
  routed             for every routed table, source = table + quarantine, record for record
  gold_recomputed    every table kept incrementally equals its query run in batch (Spark)
  versions_whole     every Delta version of every table is whole, every data file of the
                     latest version exists with the row count its log states, and no
                     streaming batch is committed twice

The tables each invariant covers come from the tables' declarations (the project's assets
and the packages LAKEHOUSE_ASSET_PACKAGES names): each is listed under its invariant. Each
violation is printed with its table and a few of the offending rows. Run it when no
materialization is running, after the last landed files were processed; with --allow-pending,
work not done yet (files not ingested, silver or gold behind) is not a violation, but what is
there must still be whole and never duplicated. Exits 0 when every invariant holds, 1 when
one does not.
"""

REPLAY = """\
Re-evaluate the quarantined rows of TABLE (a routed table, layer.name, e.g.
silver.recordings_enriched) against its rules and lookups as they are now, and move the rows
that now pass into TABLE, exactly once: after fixing a rule, or landing the patients a
recording was waiting for. Rows that still fail stay quarantined. Safe to run again, and to
run again after a crash (it finishes the replay the crash cut short first). Starts Spark
(embedded, or the engine at LAKEHOUSE_SPARK_REMOTE).
"""

EXPORT_SDP = """\
Write the project's tables (its own and LAKEHOUSE_ASSET_PACKAGES') as a Spark Declarative
Pipelines project in DIR: spark-pipeline.yml, transformations/<layer>.<name>.py or .sql, a
run.sh with the exact spark-pipelines command, and a README.md. Datasets are named
layer.name and written as Delta tables. What open-source SDP cannot express (AUTO CDC,
quarantines, expectations that drop rows) is left out and listed, here and in the README.
Refuses a DIR that is not empty unless --force (files of the same names are overwritten).
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``verify``, ``quarantine replay`` and ``export-sdp``."""
    verify = add_command(subparsers, "verify", parents, run_verify,
                         "check that nothing was lost, duplicated or half-written", VERIFY, spark=True, json=True)
    verify.add_argument("--allow-pending", action="store_true",
                        help="accept work not done yet (e.g. while runs are pending or after a crash)")
    quarantine = add_command(subparsers, "quarantine", parents, None, "work with a table's quarantine",
                             "Work with a routed table's quarantine.")
    actions = quarantine.add_subparsers(title="actions", metavar="ACTION", dest="action", required=True)
    add_command(actions, "replay", parents, run_replay, "move rows that now pass into the table", REPLAY,
                spark=True, table="TABLE", json=True)
    export = add_command(subparsers, "export-sdp", parents, run_export,
                         "the asset graph as a Spark Declarative Pipelines project", EXPORT_SDP)
    export.add_argument("dir", metavar="DIR", type=Path, help="the folder to write the project in")
    export.add_argument("--force", action="store_true", help="write into DIR even if it is not empty")


def run_verify(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Check every invariant; print the verdicts and violations; 1 if any is violated."""
    from lakehouse_assets.reliability import check_all

    root = catalog.require_root(lakehouse.settings())
    report = check_all(lakehouse, pending_ok=args.allow_pending)
    if args.json:
        print_json({
            "root": str(root),
            "ok": report.ok,
            "invariants": [{"name": r.name, "description": r.description, "ok": r.ok, "skipped": r.skipped,
                            "checked": r.checked, "not_checked": r.passed_over,
                            "violations": [{"table": v.table, "message": v.message, "samples": list(v.samples)}
                                           for v in r.violations]}
                           for r in report.results],
        })
    else:
        print(f"Lakehouse root: {root}")
        print(report.summary())
        if not report.ok:
            print(f"lakehouse: error: {len(report.violations)} invariant violations (see above)", file=sys.stderr)
    return EXIT_OK if report.ok else EXIT_FAILURE


def run_replay(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Replay the quarantine of the table asked for."""
    import dataclasses

    from lakehouse_assets.definitions import project_definitions
    from lakehouse_assets.io.replay import replay_quarantine, routed_table_assets

    settings = lakehouse.settings()
    routed = routed_table_assets(list(project_definitions(settings).assets or []))
    asset = routed.get(str(args.table))
    if asset is None:
        raise CommandError(f"{args.table} is not a routed table, so it has no quarantine to replay; routed tables: "
                           f"{', '.join(sorted(routed)) or 'none'}")
    result = replay_quarantine(asset, lakehouse.spark_session, settings, lakehouse.store())
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


def run_export(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Write the project; print what was written and what was left out."""
    from lakehouse_assets.assets.discovery import project_packages
    from lakehouse_assets.definitions import project_definitions
    from lakehouse_assets.pipelines.export import plan_export, write_export

    folder: Path = args.dir
    if folder.exists() and not folder.is_dir():
        raise CommandError(f"{folder} is a file: give a folder to write the SDP project in")
    if folder.is_dir() and any(folder.iterdir()) and not args.force:
        raise CommandError(f"{folder} is not empty: give an empty or new folder, or --force to write into it")
    settings = lakehouse.settings()
    export = plan_export(folder, project_definitions(settings).assets or [], project_packages(settings.asset_packages),
                         settings)
    written = write_export(export)
    print(f"Wrote the SDP project in {export.folder} ({len(written)} files)")
    print(render_table(["TABLE", "AS", "FILE", "DIFFERS"],
                       [[e.table, e.kind, e.file, e.note or "-"] for e in export.exported], max_cell_width=200))
    if export.left_out:
        print("\nLeft out")
        print(render_table(["TABLE", "WHY"], [[o.table, o.reason] for o in export.left_out], max_cell_width=400))
    print(f"\nRun it: cd {export.folder} && ./run.sh   (see README.md there)")
    return EXIT_OK
