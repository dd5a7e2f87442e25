"""An ingestion source (Auto Loader over a landing folder): its query is rebuilt and
restarted when the landed data's schema evolves, and the files deleted between the query's
listing and its read are named, since their records are not in the table and only this
warning says so. Its expectations (WARN, FAIL) are enforced on each micro-batch; with ERROR
ones (a routed ingestion) each record goes to the table or its quarantine; without any, an
append goes through Delta's own streaming sink."""

from __future__ import annotations

from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from lakehouse_assets.checkpoints.checkpoint import Checkpoint
from lakehouse_assets.ingestion.state import vanished_files, vanished_message
from lakehouse_assets.io.handlers.query import has_work, run_query, skipped, stream_written
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.outputs import IncrementalSource
from lakehouse_assets.quality.expectations import expecting
from lakehouse_assets.quality.quarantine import QuarantineSink, route
from lakehouse_assets.storage import DeltaSink, DeltaTableStore
from lakehouse_assets.storage.sink import DeltaStreamSink
from lakehouse_assets.streaming import RunSink
from lakehouse_assets.tables.upstream_versions import UpstreamVersions


def write_ingestion(source: IncrementalSource, run: TableRun, store: DeltaTableStore, log: Any) -> Written:
    """Run the ingestion query of ``source`` into the table."""
    rules = source.expectations
    reading = UpstreamVersions({})  # landed files, no table
    if not has_work(run, store, source.has_new_data):
        return stream_written(run, store, skipped(run, log), rules, reads_files=True, reading=reading,
                              files_vanished=dg.MetadataValue.json([]))
    checkpoint = str(run.table.checkpoint)
    done_before = Checkpoint(checkpoint).last_committed_batch()
    sink: RunSink
    build = source.build
    if run.quarantine is not None:
        # A routed ingestion: each landed record goes to the table or, failing an ERROR rule,
        # to its quarantine with the rules' names, both written per micro-batch.
        sink = QuarantineSink(
            passed=DeltaSink(store, str(run.table.path), checkpoint, merge_schema=run.spec.merge_schema,
                             layout=run.spec.layout, declared=run.spec.declared_types),
            quarantine=DeltaSink(store, str(run.quarantine.path), checkpoint, merge_schema=True),
            passed_columns=None, quarantine_columns=None, rules=rules, table=run.table.table_name)

        def build() -> DataFrame:
            return route(source.build(), rules)
    elif rules or run.spec.output_mode != "append":
        table = DeltaSink(store, str(run.table.path), checkpoint, output_mode=run.spec.output_mode, keys=run.spec.keys,
                          merge_schema=run.spec.merge_schema, layout=run.spec.layout, declared=run.spec.declared_types)
        sink = expecting(table, rules, run.table.table_name)
    else:
        sink = DeltaStreamSink(store, str(run.table.path), merge_schema=run.spec.merge_schema, reads_files=True,
                               layout=run.spec.layout, declared=run.spec.declared_types)
    query = run_query(run, build, sink, log, restart_when=source.restart_when, max_restarts=source.max_restarts)
    vanished = vanished_files(checkpoint, after_batch=done_before)
    for path in vanished:
        log.warning(vanished_message(path, run.table.table_name))
    return stream_written(run, store, query, rules, reads_files=True, reading=reading,
                          files_vanished=dg.MetadataValue.json(vanished))
