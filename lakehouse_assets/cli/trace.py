"""``lakehouse trace TABLE --where PREDICATE``: where each matching row came from."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import positive_int, table_name
from lakehouse_assets.cli.errors import EXIT_OK
from lakehouse_assets.cli.output import print_json, render_table

if TYPE_CHECKING:
    from lakehouse_assets.reliability.provenance import RowTrace
    from lakehouse_assets.resource import LakehouseResource

DEFAULT_LIMIT = 20

DESCRIPTION = """\
Trace the rows of TABLE (layer.name) that match a Spark SQL predicate to where they landed:
for each, the landing file and line it was read from, and the versions of bronze and of
every table above it that carried it (read from the tables' logs). Bronze, silver and
quarantine rows keep _source_file and _source_line; a row of a grouped gold table (SQL)
is traced through the source rows of its group. Starts Spark (embedded, or the engine at
LAKEHOUSE_SPARK_REMOTE).

examples:
  lakehouse trace silver.recordings_enriched --where "mrn = 1234 AND heartrate > 180"
  lakehouse trace silver.recordings_quarantine --where "_quarantine_reason LIKE '%known_patient%'" --json
  lakehouse trace gold.daily_patient_avg --where "mrn = 1234" --limit 1
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``trace``."""
    parser = subparsers.add_parser(
        "trace", parents=parents, help="where rows came from: landing file, line, versions",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", metavar="TABLE", type=table_name,
                        help="the table as layer.name, e.g. silver.recordings_enriched")
    parser.add_argument("--where", required=True, metavar="PREDICATE",
                        help="which rows, as a Spark SQL predicate over the table's columns")
    parser.add_argument("--limit", type=positive_int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"trace at most N rows (default {DEFAULT_LIMIT})")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(run=run, spark=True)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Print where each matching row came from."""
    settings = lakehouse.settings()
    path = catalog.require_table(settings, args.table)
    from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN
    from lakehouse_assets.reliability.provenance import group_json, trace_groups, trace_json, trace_rows

    grouped = SOURCE_FILE_COLUMN not in lakehouse.store().schema(str(path)).names
    tables = lakehouse.tables
    table = str(args.table)
    if grouped:
        groups = trace_groups(tables, table, args.where, limit=args.limit)
        if args.json:
            print_json({"table": table, "where": args.where, "rows": [group_json(g) for g in groups]})
            return EXIT_OK
        for group in groups:
            print(", ".join(f"{k}={v}" for k, v in group.row.items()))
            _print_traces(list(group.sources), indent="  ")
        if not groups:
            print(f"No row of {table} matches {args.where!r}")
        return EXIT_OK
    traces = trace_rows(tables, table, args.where, limit=args.limit)
    if args.json:
        print_json({"table": table, "where": args.where, "rows": [trace_json(t) for t in traces]})
        return EXIT_OK
    if not traces:
        print(f"No row of {table} matches {args.where!r}")
        return EXIT_OK
    _print_traces(traces)
    return EXIT_OK


def _print_traces(traces: list[RowTrace], indent: str = "") -> None:
    if not traces:
        print(f"{indent}(no source rows)")
        return
    carriers = [c.table for c in traces[0].carried_by]
    text = render_table(
        ["SOURCE FILE", "LINE", *[c.upper() for c in carriers], "ROW"],
        [[t.source_file, t.source_line, *[c.version for c in t.carried_by],
          ", ".join(f"{k}={v}" for k, v in t.row.items() if not k.startswith("_"))] for t in traces],
        max_cell_width=250)  # the whole path: it is what a person opens
    print("\n".join(indent + line for line in text.splitlines()))
    print(f"{indent}({len(traces)} row{'s' if len(traces) != 1 else ''}; each version column names the "
          "version of that table that first held the row)")
