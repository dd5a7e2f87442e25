"""``lakehouse copy-into TABLE --from PATH --format FORMAT``: the course's ``COPY INTO``.

An idempotent batch load (:func:`lakehouse_assets.ingestion.copy_into`): the files under
PATH that TABLE has not loaded before are appended in one Delta commit, the others are
skipped, so running it again loads only what is new. The one command that starts Spark: on
the engine when ``LAKEHOUSE_SPARK_REMOTE`` is set, else an embedded session.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli.arguments import TableName, table_name
from lakehouse_assets.cli.catalog import require_root
from lakehouse_assets.cli.errors import EXIT_OK, UsageError
from lakehouse_assets.cli.output import print_json

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DESCRIPTION = """\
Load the files under PATH into TABLE (layer.name), like COPY INTO: each file once. Files the
table loaded before are skipped unless --force; the table is created by the first load.
Runs Spark (embedded, or the engine at LAKEHOUSE_SPARK_REMOTE).

example:
  lakehouse copy-into bronze.patients_copy --from lakehouse_data/landing/patients \\
      --format csv --option header=true --option inferSchema=true
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``copy-into``."""
    parser = subparsers.add_parser(
        "copy-into", parents=parents, help="load files into a table once each (COPY INTO)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", metavar="TABLE", type=table_name,
                        help="the table as layer.name, e.g. bronze.patients_copy")
    parser.add_argument("--from", dest="source", metavar="PATH", required=True,
                        help="the folder of files to load (and its subfolders)")
    parser.add_argument("--format", required=True, choices=("csv", "json", "parquet"),
                        help="the files' format (COPY INTO's FILEFORMAT)")
    parser.add_argument("--pattern", metavar="GLOB",
                        help="load only files whose path under PATH matches, e.g. '2024-*/*.csv'")
    parser.add_argument("--option", dest="options", metavar="KEY=VALUE", action="append", default=[],
                        type=_reader_option, help="a Spark reader option (FORMAT_OPTIONS); repeatable")
    parser.add_argument("--force", action="store_true", help="load matching files again, even if loaded before")
    parser.add_argument("--merge-schema", action="store_true",
                        help="let the files add columns to the table (COPY_OPTIONS mergeSchema)")
    parser.add_argument("--json", action="store_true", help="print what was loaded as JSON")
    parser.set_defaults(run=run, spark=True)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Load the new files; print what was loaded and skipped."""
    settings = lakehouse.settings()
    table: TableName = args.table
    require_root(settings)
    source = Path(args.source)
    if not source.is_dir():
        raise UsageError(f"Cannot copy into {table} from {source}: it is not a folder. Pass --from the folder "
                         "that holds the files.")

    from lakehouse_assets.ingestion import copy_into

    spark = lakehouse.spark_session
    result = copy_into(
        spark, table_path=settings.table_path(table.layer, table.name), source=source.resolve(),
        format=args.format, pattern=args.pattern, force=args.force, merge_schema=args.merge_schema,
        format_options=dict(args.options), store=lakehouse.store(),
    )
    if args.json:
        print_json({"table": str(table), "loaded": list(result.loaded), "skipped": list(result.skipped),
                    "rows_written": result.rows_written, "version": result.version, "load_id": result.load_id})
        return EXIT_OK
    version = f" as version {result.version}" if result.version is not None else ""
    print(f"{table}: loaded {len(result.loaded)} file(s), {result.rows_written} row(s){version}; "
          f"skipped {len(result.skipped)} file(s) loaded before")
    for path in result.loaded:
        print(f"  loaded   {path}")
    return EXIT_OK


def _reader_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"invalid --option {text!r}: give KEY=VALUE, e.g. header=true")
    return key, value
