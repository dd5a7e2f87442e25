"""``lakehouse shell``: an interactive PySpark session with the lakehouse's tables by name.

The namespace holds ``spark``, ``tables`` (:class:`~lakehouse_assets.tables.LakehouseTables`)
and its two most used methods as ``sql`` and ``table``, so the seeds' cells read the same:
``sql("SELECT * FROM gold.daily_patient_avg").show()``.
"""

from __future__ import annotations

import argparse
import code
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli.catalog import require_root
from lakehouse_assets.cli.errors import EXIT_OK

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DESCRIPTION = """\
Start a Python shell with a Spark session and the lakehouse's tables by name:
  sql("SELECT * FROM gold.daily_patient_avg").show()
  table("silver.recordings_enriched", version=2).count()
  tables.read_stream("bronze.recordings")      # a streaming DataFrame
  tables.names()                                # every table as layer.name
-c CODE runs CODE in that namespace instead, and exits.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``shell``."""
    parser = subparsers.add_parser(
        "shell", parents=parents, help="a PySpark shell with the tables by name",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", dest="code", metavar="CODE", help="run CODE and exit instead of a shell")
    parser.set_defaults(run=run, spark=True)


def run(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Open the shell (or run ``-c`` code) with the tables by name."""
    settings = lakehouse.settings()
    require_root(settings)

    spark = lakehouse.spark_session
    tables = lakehouse.tables
    namespace: dict[str, Any] = {"spark": spark, "tables": tables, "sql": tables.sql, "table": tables.table}
    if args.code is not None:
        exec(compile(args.code, "<lakehouse shell -c>", "exec"), namespace)  # noqa: S102 - the user's own code
        return EXIT_OK
    names = tables.names()
    banner = (
        f"lakehouse shell: Spark {spark.version}, lakehouse at {settings.root}\n"
        f"tables: {', '.join(names) if names else 'none yet'}\n"
        "in scope: spark, tables, sql(query), table(name, version=None)\n"
        'e.g. sql("SELECT * FROM gold.daily_patient_avg LIMIT 5").show()'
    )
    code.interact(banner=banner, local=namespace, exitmsg="")
    return EXIT_OK
