"""``lakehouse export-sdp DIR``: the project's asset graph as a Spark Declarative Pipelines
project, for pyspark's own ``spark-pipelines run`` (:mod:`lakehouse_assets.pipelines.export`).

Reads the definitions and the Delta logs only: no Spark starts.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli.errors import EXIT_OK, CommandError
from lakehouse_assets.cli.output import render_table

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DESCRIPTION = """\
Write the project's tables (its own and LAKEHOUSE_ASSET_PACKAGES') as a Spark Declarative
Pipelines project in DIR: spark-pipeline.yml, transformations/<layer>.<name>.py or .sql, a
run.sh with the exact spark-pipelines command, and a README.md. Datasets are named
layer.name and written as Delta tables. What open-source SDP cannot express (AUTO CDC,
quarantines, expectations that drop rows) is left out and listed, here and in the README.
Refuses a DIR that is not empty unless --force (files of the same names are overwritten).
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``export-sdp``."""
    parser = subparsers.add_parser(
        "export-sdp", parents=parents, help="the asset graph as a Spark Declarative Pipelines project",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", metavar="DIR", type=Path, help="the folder to write the project in")
    parser.add_argument("--force", action="store_true", help="write into DIR even if it is not empty")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Write the project; print what was written and what was left out."""
    settings = lakehouse.settings()
    from lakehouse_assets.assets.discovery import project_packages
    from lakehouse_assets.definitions import project_definitions
    from lakehouse_assets.pipelines.export import plan_export, write_export

    folder: Path = args.dir
    if folder.exists() and not folder.is_dir():
        raise CommandError(f"{folder} is a file: give a folder to write the SDP project in")
    if folder.is_dir() and any(folder.iterdir()) and not args.force:
        raise CommandError(f"{folder} is not empty: give an empty or new folder, or --force to write into it")
    definitions = project_definitions(settings)
    export = plan_export(folder, definitions.assets or [], project_packages(settings.asset_packages), settings)
    written = write_export(export)
    print(f"Wrote the SDP project in {export.folder} ({len(written)} files)")
    print(render_table(["TABLE", "AS", "FILE", "DIFFERS"],
                       [[e.table, e.kind, e.file, e.note or "-"] for e in export.exported], max_cell_width=200))
    if export.left_out:
        print("\nLeft out")
        print(render_table(["TABLE", "WHY"], [[o.table, o.reason] for o in export.left_out], max_cell_width=400))
    print(f"\nRun it: cd {export.folder} && ./run.sh   (see README.md there)")
    return EXIT_OK
