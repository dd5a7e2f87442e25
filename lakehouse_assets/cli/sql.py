"""``lakehouse sql "<query>"``: a SQL query over the tables by name, printed as a table or JSON.

``FROM bronze.recordings`` names the table in Spark's own catalog, where the lakehouse's
tables are registered (:mod:`lakehouse_assets.tables.catalog`); the query runs on Spark,
embedded or on the engine at ``LAKEHOUSE_SPARK_REMOTE``, as written.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli.arguments import positive_int
from lakehouse_assets.cli.catalog import declared_tables, require_root
from lakehouse_assets.cli.errors import EXIT_OK, CommandError, UsageError
from lakehouse_assets.cli.output import print_json, render_table
from lakehouse_assets.errors import UnknownTableError

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DEFAULT_LIMIT = 1000

DESCRIPTION = """\
Run a Spark SQL query over the lakehouse's tables, named layer.name, and print the result.
The tables are Spark's and Delta's own: time travel is `FROM silver.recordings_enriched
VERSION AS OF 3` (or TIMESTAMP AS OF '2026-11-25 10:00:00'), and DESCRIBE HISTORY,
DESCRIBE DETAIL and SHOW TABLES IN silver work. Starts Spark (embedded, or the engine at
LAKEHOUSE_SPARK_REMOTE).

examples:
  lakehouse sql "SELECT * FROM gold.daily_patient_avg ORDER BY date LIMIT 10"
  lakehouse sql "SELECT device_id, count(*) AS n FROM bronze.recordings GROUP BY device_id" --format json
  lakehouse sql "SELECT count(*) FROM silver.recordings_enriched VERSION AS OF 2"
  lakehouse sql "DESCRIBE HISTORY gold.daily_patient_avg"
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``sql``."""
    parser = subparsers.add_parser(
        "sql", parents=parents, help="run a SQL query over the tables by name",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("query", metavar="QUERY", help="the query, e.g. \"SELECT * FROM gold.device_counts\"")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="a text table (default) or a JSON array of row objects")
    parser.add_argument("--limit", type=positive_int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"print at most N rows (default {DEFAULT_LIMIT})")
    parser.set_defaults(run=run, spark=True)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Run the query; print its rows."""
    settings = lakehouse.settings()
    require_root(settings)
    from pyspark.errors import AnalysisException

    from lakehouse_assets.spark_conf import is_connect_session

    spark = lakehouse.spark_session
    if not is_connect_session(spark):
        # Spark logs a failed query's analysis error before raising it; the error is printed once, below.
        spark.sparkContext.setLogLevel("FATAL")
    tables = lakehouse.tables
    try:
        df = tables.sql(args.query)
        if df.isStreaming:
            raise UsageError("The query reads a stream (STREAM(...)); `lakehouse sql` reads tables as they "
                             "stand. Drop STREAM(...) to query the table.")
        rows = df.limit(args.limit + 1).collect()
    except AnalysisException as exc:  # Spark's parse and analysis errors: its first lines say it
        raise CommandError(f"The query failed: {_first_lines(str(exc))}") from exc
    except UnknownTableError as exc:  # a declared table not built yet: say how it gets built
        raise UnknownTableError(exc.name, exc.root, exc.known, declared_tables(settings)) from None
    shown = rows[: args.limit]
    if args.format == "json":
        print_json([row.asDict(recursive=True) for row in shown])
    else:
        print(render_table(df.columns, [list(row) for row in shown]))
        more = " (more rows not shown; raise --limit)" if len(rows) > args.limit else ""
        print(f"({len(shown)} row{'s' if len(shown) != 1 else ''}){more}")
    return EXIT_OK


def _first_lines(message: str, count: int = 3) -> str:
    lines = [line for line in message.splitlines() if line.strip() and not line.startswith(("\tat ", "JVM stacktrace"))]
    return "\n".join(lines[:count])
