"""The commands that read tables, none of which writes: ``show`` (rows at a version, read with
delta-rs: no JVM), ``history`` (commits, like DESCRIBE HISTORY), ``events`` (the event log,
``system.event_log``), ``trace`` (where rows came from), and on Spark, with the tables by name in its
catalog (:mod:`lakehouse_assets.tables.catalog`), ``sql`` (a query) and ``shell`` (a PySpark shell
with ``tables``, :class:`~lakehouse_assets.tables.LakehouseTables`, and its ``sql`` and ``table``)."""

from __future__ import annotations

import argparse
import code
import dataclasses
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli import catalog
from lakehouse_assets.cli.arguments import add_command, non_negative_int, table_name
from lakehouse_assets.cli.errors import EXIT_OK, CommandError, UsageError
from lakehouse_assets.cli.output import format_count, format_time, or_dash, print_json, render_table
from lakehouse_assets.errors import UnknownTableError

if TYPE_CHECKING:
    from lakehouse_assets.reliability.provenance import RowTrace
    from lakehouse_assets.resource import LakehouseResource
    from lakehouse_assets.tables.event_log import Event

HISTORY = """\
Show the commits of TABLE (layer.name), newest first, like Delta's DESCRIBE HISTORY: version,
time, operation, rows written, and for streaming writes the query and micro-batch that wrote
the version. Read from the Delta log; no Spark is started.
"""

EVENTS = """\
Show the event log: one row per commit of each table (a micro-batch, a batch write, a merge),
oldest first per table: the run and query that made it, the batch, the table version, rows
written, rows its rules checked and what each failed, when the batch started and how long it
took until its commit. Read from the tables' own commits (Delta's history) with delta-rs; no
Spark is started. "-" is a number the commit does not record (rows checked by a query without
rules, the start of a batch Delta's own streaming sink wrote); --json gives it as null. The
same rows are the view system.event_log for `lakehouse sql`.
"""

TRACE = """\
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

SHOW = """\
Show the first rows of TABLE (layer.name) as a table, or as JSON with --json. --version V
shows the table as it was at version V (time travel; see `lakehouse history TABLE` for the
versions). Missing values show as NULL, times as UTC. Rows come in storage order.
"""

SQL = """\
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

SHELL = """\
Start a Python shell with a Spark session and the lakehouse's tables by name:
  sql("SELECT * FROM gold.daily_patient_avg").show()
  table("silver.recordings_enriched", version=2).count()
  tables.read_stream("bronze.recordings")      # a streaming DataFrame
  tables.names()                                # every table as layer.name
-c CODE runs CODE in that namespace instead, and exits.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``history``, ``events``, ``trace``, ``show``, ``sql`` and ``shell``."""
    add_command(subparsers, "history", parents, run_history, "a table's commits, newest first", HISTORY,
                table="TABLE", limit=(20, "show the N newest versions"), json=True)
    events = add_command(subparsers, "events", parents, run_events, "what each batch did (the event log)", EVENTS,
                         limit=(50, "show the N newest events"), json=True)
    events.add_argument("--table", metavar="TABLE", type=table_name, help="only this table's commits (layer.name)")
    events.add_argument("--run", dest="run_id", metavar="RUN_ID", help="only this Dagster run's commits")
    trace = add_command(subparsers, "trace", parents, run_trace, "where rows came from: landing file, line, versions",
                        TRACE, spark=True, table="TABLE", limit=(20, "trace at most N rows"), json=True)
    trace.add_argument("--where", required=True, metavar="PREDICATE",
                       help="which rows, as a Spark SQL predicate over the table's columns")
    show = add_command(subparsers, "show", parents, run_show, "a table's rows, at any version", SHOW,
                       table="TABLE", limit=(20, "show at most N rows"), json=True)
    show.add_argument("--version", type=non_negative_int, metavar="V", help="show version V instead of the latest")
    sql = add_command(subparsers, "sql", parents, run_sql, "run a SQL query over the tables by name", SQL,
                      spark=True, limit=(1000, "print at most N rows"))
    sql.add_argument("query", metavar="QUERY", help="the query, e.g. \"SELECT * FROM gold.device_counts\"")
    sql.add_argument("--format", choices=("table", "json"), default="table",
                     help="a text table (default) or a JSON array of row objects")
    shell = add_command(subparsers, "shell", parents, run_shell, "a PySpark shell with the tables by name", SHELL,
                        spark=True)
    shell.add_argument("-c", dest="code", metavar="CODE", help="run CODE and exit instead of a shell")


def run_history(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Print the table's history."""
    path = catalog.require_table(lakehouse.settings(), args.table)
    store = lakehouse.store()
    with catalog.reading(args.table, path):
        entries = store.history(str(path), limit=args.limit)
        latest = store.version(str(path))
    # delta-rs writes record their rows as num_added_rows, which the store does not read.
    rows: list[dict[str, Any]] = [{"version": e.version, "timestamp": e.timestamp, "operation": e.operation,
             "rows_written": e.metrics.get("num_added_rows") if e.rows_written is None else e.rows_written,
             "query": e.query, "batch_id": e.batch_id, "parameters": dict(e.parameters),
             "metrics": dict(e.metrics)} for e in entries]
    if args.json:
        print_json({"table": str(args.table), "path": str(path), "history": rows})
        return EXIT_OK
    print(render_table(
        ["VERSION", "TIMESTAMP", "OPERATION", "ROWS WRITTEN", "QUERY", "BATCH", "PARAMETERS"],
        [[r["version"], format_time(r["timestamp"]), r["operation"], r["rows_written"],
          r["query"], r["batch_id"], r["parameters"] or None] for r in rows]))
    if latest is not None and entries and entries[-1].version > 0:
        print(f"({len(entries)} newest of {latest + 1} versions of {args.table}; "
              "--limit N shows more)")
    return EXIT_OK


def run_events(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Print the events asked for."""
    from lakehouse_assets.tables.event_log import events

    root = catalog.require_root(lakehouse.settings())
    if args.table:
        catalog.require_table(lakehouse.settings(), args.table)
    found = events(root, table=str(args.table) if args.table else None, run_id=args.run_id)
    found.sort(key=lambda e: e.committed_at)
    shown = found[-args.limit:]
    if args.json:
        print_json({"events": [dataclasses.asdict(e) for e in shown], "matched": len(found)})
        return EXIT_OK
    if not found:
        print("No events" + (" for the table and run asked" if args.table or args.run_id else
                             ": nothing has been materialized yet"))
        return EXIT_OK
    print(render_table(
        ["RUN", "TABLE", "BATCH", "VERSION", "WRITTEN", "CHECKED", "EXPECTATIONS FAILED", "STARTED", "MS",
         "OPERATION"],
        [[or_dash(value) for value in ((e.run_id or "")[:8], e.table, e.batch_id, e.version, e.rows_written,
                                      e.rows_checked, _failed(e),
                                      format_time(e.started_at or e.committed_at), e.duration_ms, e.operation)]
         for e in shown],
        right_align=("BATCH", "VERSION", "WRITTEN", "CHECKED", "MS")))
    if len(found) > len(shown):
        print(f"({len(shown)} newest of {len(found)} events; --limit N shows more)")
    return EXIT_OK


def _failed(event: Event) -> str | None:
    """The rows of the batch each rule failed (the rules that failed any); "0" when its rules
    counted and none failed; None when no rule counted the batch."""
    if event.expectations_failed is None:
        return None
    return ", ".join(f"{name}={n}" for name, n in event.expectations_failed.items() if n) or "0"


def run_trace(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Print where each matching row came from."""
    from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN
    from lakehouse_assets.reliability.provenance import group_json, trace_groups, trace_json, trace_rows

    path = catalog.require_table(lakehouse.settings(), args.table)
    grouped = SOURCE_FILE_COLUMN not in lakehouse.store().schema(str(path)).names
    table = str(args.table)
    if grouped:
        groups = trace_groups(lakehouse.tables, table, args.where, limit=args.limit)
        found = [group_json(g) for g in groups]
    else:
        traces = trace_rows(lakehouse.tables, table, args.where, limit=args.limit)
        found = [trace_json(t) for t in traces]
    if args.json:
        print_json({"table": table, "where": args.where, "rows": found})
    elif not found:
        print(f"No row of {table} matches {args.where!r}")
    elif grouped:
        for group in groups:
            print(", ".join(f"{k}={v}" for k, v in group.row.items()))
            _print_traces(list(group.sources), indent="  ")
    else:
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


def run_show(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Print the first rows at the version asked for (default: the latest)."""
    path = catalog.require_table(lakehouse.settings(), args.table)
    store = lakehouse.store()
    with catalog.reading(args.table, path):
        snapshot = store.snapshot(str(path))
        latest = version = snapshot.version
        if args.version is not None and args.version != latest:
            if args.version > latest:
                raise CommandError(
                    f"{args.table} has no version {args.version}: its versions run from 0 to {latest}. "
                    f"See `lakehouse history {args.table}` for what each version holds.")
            version = args.version
            snapshot = store.snapshot(str(path), version=version)
        rows, total = snapshot.to_arrow(limit=args.limit), snapshot.row_count()
    records = rows.to_pylist()
    if args.json:
        print_json({"table": str(args.table), "path": str(path), "version": version,
                    "latest_version": latest, "total_rows": total, "columns": rows.column_names,
                    "rows": records})
        return EXIT_OK
    print(render_table(rows.column_names, [[r[c] for c in rows.column_names] for r in records]))
    at = f"version {version}" + (" (latest)" if version == latest else f" of 0..{latest}")
    print(f"({len(records)} of {format_count(total)} rows of {args.table} at {at})")
    return EXIT_OK


def run_sql(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Run the query; print its rows."""
    settings = lakehouse.settings()
    catalog.require_root(settings)
    from pyspark.errors import AnalysisException

    from lakehouse_assets.spark_conf import is_connect_session

    spark = lakehouse.spark_session
    if not is_connect_session(spark):
        # Spark logs a failed query's analysis error before raising it; the error is printed once, below.
        spark.sparkContext.setLogLevel("FATAL")
    try:
        df = lakehouse.tables.sql(args.query)
        if df.isStreaming:
            raise UsageError("The query reads a stream (STREAM(...)); `lakehouse sql` reads tables as they "
                             "stand. Drop STREAM(...) to query the table.")
        rows = df.limit(args.limit + 1).collect()
    except AnalysisException as exc:  # Spark's parse and analysis errors: its first lines say it
        raise CommandError(f"The query failed: {_first_lines(str(exc))}") from exc
    except UnknownTableError as exc:  # a declared table not built yet: say how it gets built
        raise UnknownTableError(exc.name, exc.root, exc.known, catalog.declared_tables(settings)) from None
    shown = rows[: args.limit]
    if args.format == "json":
        print_json([row.asDict(recursive=True) for row in shown])
    else:
        print(render_table(df.columns, [list(row) for row in shown]))
        more = " (more rows not shown; raise --limit)" if len(rows) > args.limit else ""
        print(f"({len(shown)} row{'s' if len(shown) != 1 else ''}){more}")
    return EXIT_OK


def run_shell(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Open the shell (or run ``-c`` code) with the tables by name."""
    settings = lakehouse.settings()
    catalog.require_root(settings)

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


def _first_lines(message: str, count: int = 3) -> str:
    lines = [line for line in message.splitlines() if line.strip() and not line.startswith(("\tat ", "JVM stacktrace"))]
    return "\n".join(lines[:count])
