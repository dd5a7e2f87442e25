"""An ingestion source (Auto Loader over a landing folder): its query is rebuilt and
restarted when the landed data's schema evolves, and the files deleted between the run's
listing and the query's read are named, since their records are not in the table and only
this warning says so. Its expectations (WARN, FAIL) are enforced on each micro-batch; with
ERROR ones (a routed ingestion) each record goes to the table or its quarantine; without any,
an append goes through Delta's own streaming sink."""

from __future__ import annotations

from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from lakehouse_assets.ingestion.state import ingested_files, vanished_message
from lakehouse_assets.io.handlers.query import run_query, stream_written
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.location import locate
from lakehouse_assets.outputs import IncrementalSource
from lakehouse_assets.quality.expectations import expecting
from lakehouse_assets.quality.quarantine import QuarantineSink, route
from lakehouse_assets.storage import DeltaSink, DeltaTableStore
from lakehouse_assets.storage.batch_record import Reading
from lakehouse_assets.storage.sink import DeltaStreamSink
from lakehouse_assets.streaming import RunSink


def write_ingestion(source: IncrementalSource, run: TableRun, store: DeltaTableStore, log: Any) -> Written:
    """Run the ingestion query of ``source`` into the table."""
    rules = source.expectations
    listed = source.unread() if source.unread is not None else []
    sink: RunSink
    build = source.build
    if run.quarantine is not None:
        # A routed ingestion: each landed record goes to the table or, failing an ERROR rule,
        # to its quarantine with the rules' names, both written per micro-batch.
        sink = QuarantineSink(
            passed=DeltaSink(store, str(run.table.path), merge_schema=run.spec.merge_schema,
                             layout=run.spec.layout, declared=run.spec.declared_types),
            quarantine=DeltaSink(store, str(run.quarantine.path), merge_schema=True),
            passed_columns=None, quarantine_columns=None, rules=rules, table=run.table.table_name)

        def build() -> DataFrame:
            return route(source.build(), rules)
    elif rules or run.spec.output_mode != "append":
        table = DeltaSink(store, str(run.table.path), output_mode=run.spec.output_mode, keys=run.spec.keys,
                          merge_schema=run.spec.merge_schema, layout=run.spec.layout, declared=run.spec.declared_types)
        sink = expecting(table, rules, run.table.table_name)
    else:
        sink = DeltaStreamSink(store, str(run.table.path), merge_schema=run.spec.merge_schema, reads_files=True,
                               layout=run.spec.layout, declared=run.spec.declared_types)
    # Landed files, no table: the run reads no table's version.
    query = run_query(run, build, sink, log, Reading(), restart_when=source.restart_when,
                      max_restarts=source.max_restarts)
    vanished = _vanished(listed, run, store)
    for path in vanished:
        log.warning(vanished_message(path, run.table.table_name))
    return stream_written(run, store, query, rules, files_vanished=dg.MetadataValue.json(vanished))


def _vanished(listed: list[str], run: TableRun, store: DeltaTableStore) -> list[str]:
    """Of the files the run found unread before its query, those gone now whose records no
    table holds: deleted between the listing and the read, they were skipped. The tables are
    read only when one is gone."""
    gone = [path for path in listed if not locate(path, run.root.store).exists()]
    if not gone:
        return []
    held = ingested_files(store, [t.path for t in run.written])
    return [path for path in gone if path not in held]
