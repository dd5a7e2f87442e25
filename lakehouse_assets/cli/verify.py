"""``lakehouse verify``: check the exactly-once invariants on the tables as they are stored
(on a local disk or S3-API object storage).

Read with delta-rs and pyarrow (Dagster only to load the declarations; Spark only to run an
incrementally kept table's query in batch), so it judges the tables independently of the code
that wrote them.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.errors import EXIT_FAILURE, EXIT_OK
from lakehouse_assets.cli.output import print_json

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DESCRIPTION = """\
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


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``verify``."""
    parser = subparsers.add_parser(
        "verify", parents=parents, help="check that nothing was lost, duplicated or half-written",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--allow-pending", action="store_true",
                        help="accept work not done yet (e.g. while runs are pending or after a crash)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(run=run, spark=True)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Check every invariant; print the verdicts and violations; 1 if any is violated."""
    settings = lakehouse.settings()
    from lakehouse_assets.reliability import check_all

    root = catalog.require_root(settings)
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
