"""The Delta IO manager: asset key ``[layer, name]`` ↔ the Delta table ``root/layer/name``.

It resolves the output once (:func:`~lakehouse_assets.io.table_run.resolve_table_run`),
hands it to the handler for the kind of object the asset returned, clears the temporary
views the asset body made (:mod:`lakehouse_assets.tables.session_views`), and reports what
the table's commits say. The handlers (one module each under :mod:`lakehouse_assets.io.handlers`)
do the writing; this class holds the locks around them, clears a table for a full refresh,
and hands inputs in as the consuming asset asks: a stream of new rows, or the table as a
batch, read when the asset's body runs (:class:`~lakehouse_assets.outputs.UpstreamTable`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

import dagster as dg
from pydantic import Field
from pyspark.sql import DataFrame

from lakehouse_assets.cdc.snapshots import SnapshotSource
from lakehouse_assets.engine.client import engine_errors
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.io.handlers.batch import write_batch
from lakehouse_assets.io.handlers.flows import write_flows
from lakehouse_assets.io.handlers.ingestion import write_ingestion
from lakehouse_assets.io.handlers.kept import report_kept
from lakehouse_assets.io.handlers.quarantine import report_quarantine
from lakehouse_assets.io.handlers.routed import write_routed
from lakehouse_assets.io.handlers.snapshots import write_snapshots
from lakehouse_assets.io.handlers.stream import write_stream
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.lineage import declared_lineage
from lakehouse_assets.io.metadata import table_metadata
from lakehouse_assets.io.table_run import TableRef, TableRun, full_refresh, resolve_table_run
from lakehouse_assets.outputs import (
    AppendFlows,
    ExpectedRows,
    IncrementalSource,
    MissingTable,
    QuarantineOf,
    RoutedRows,
    TableKept,
    UpstreamTable,
)
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import TableSpec
from lakehouse_assets.storage import DeltaTableStore, StreamOptions
from lakehouse_assets.storage.table_lock import table_locks
from lakehouse_assets.tables.catalog import register_tables
from lakehouse_assets.tables.session_views import drop_temp_views

Handler = Callable[[Any, TableRun, DeltaTableStore, Any], Written]


class DeltaIOManager(dg.ConfigurableIOManager):
    """Reads and writes table assets as Delta tables under the lakehouse root."""

    lakehouse: LakehouseResource
    read_inputs_as: Literal["batch", "stream"] = Field(
        default="batch", description="Load inputs as the table as it stands, or as a stream of new rows"
    )
    lock_timeout_seconds: float = Field(
        default=900.0,
        description="How long a run waits for another run writing the same table before it fails",
    )

    def settings(self) -> LakehouseSettings:
        """Where the lakehouse is: the Spark resource's (read when used, not when definitions load)."""
        return self.lakehouse.settings()

    def store(self) -> DeltaTableStore:
        """The table storage every handler writes through: the Spark resource's."""
        return self.lakehouse.store()

    # -- writing ------------------------------------------------------------------------------
    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """Write what the asset returned with the handler for its kind; report the tables written."""
        if obj is None:
            return
        if isinstance(obj, DataFrame):  # a body with no expectations
            obj = ExpectedRows(obj, ())
        with engine_errors(self.lakehouse.settings()):
            # Routed rows come out on a quarantine's output when it alone is selected: its
            # table's query writes them all the same.
            routed = isinstance(obj, RoutedRows)
            run = resolve_table_run(context, self.settings(), _routing_table(context) if routed else None)
            self._report(context, run.table, self._write(context, obj, run))
            for quarantine in run.written[1:] if routed else ():
                if _reported_here(context, quarantine):
                    report = self._write(context, QuarantineOf(run.table.key),
                                         resolve_table_run(context, self.settings(), quarantine.key))
                    self._report(context, quarantine, report)

    def _write(self, context: dg.OutputContext, obj: Any, run: TableRun) -> dict[str, Any]:
        """Write ``obj`` as ``run`` says; the metadata reporting the table."""
        handler, writes = _handler_for(obj, run.table)
        store = self.store()
        # A table this write creates is named in the session's catalog after it (the next
        # step's `spark.read.table` and SQL find it); the others are there already.
        new_tables = [t.table_name for t in run.written if run.full_refresh or not store.exists(str(t.path))]
        started = time.monotonic()
        if writes:
            with table_locks(run.root, run.lock_names, timeout_seconds=self.lock_timeout_seconds,
                             holder=run.lock_holder):
                if run.full_refresh:
                    for table in run.written:
                        full_refresh(store, table)
                    context.log.info(f"Full refresh of {run.table.table_name}: cleared its table, "
                                     "checkpoint and stored schema")
                written = handler(obj, run, store, context.log)
            fault_point("asset.materialized")
        else:
            written = handler(obj, run, store, context.log)
        drop_temp_views(self.lakehouse.spark_session)
        if new_tables:
            register_tables(self.lakehouse.spark_session, self.settings(), store, new_tables)
        metadata = {**written.metadata, **table_metadata(store, run, written.version, declared_lineage(run))}
        metadata["duration_seconds"] = dg.MetadataValue.float(round(time.monotonic() - started, 3))
        return metadata

    @staticmethod
    def _report(context: dg.OutputContext, table: TableRef, metadata: dict[str, Any]) -> None:
        """Report ``table`` as written by this step: as the output's own materialization, or
        as one logged here for a table of the step it yields no output for."""
        if table.key == context.asset_key:
            context.add_output_metadata(metadata)
        else:
            context.log_event(dg.AssetMaterialization(table.key, metadata=metadata))

    # -- reading ------------------------------------------------------------------------------
    def load_input(self, context: dg.InputContext) -> UpstreamTable | MissingTable:
        """The upstream table, read when the consuming asset's body runs: a stream of the rows
        each new version adds (with the options the consuming asset declared), or as it stands;
        a table not created yet comes in as :class:`MissingTable`, and the consuming asset is
        skipped."""
        table = TableRef.of(context.asset_key, self.settings())
        store = self.store()
        if not store.exists(str(table.path)):
            return MissingTable(table.table_name)
        if self.read_inputs_as == "stream":
            options = _consumer_stream_options(context, table.table_name)
            return UpstreamTable(table.table_name, lambda: self._read(
                lambda: store.read_stream(self.lakehouse.spark_session, str(table.path), options)))
        return UpstreamTable(table.table_name, lambda: self._read(
            lambda: store.read(self.lakehouse.spark_session, str(table.path))))

    def _read(self, read: Callable[[], DataFrame]) -> DataFrame:
        with engine_errors(self.lakehouse.settings()):
            return read()


def _routing_table(context: dg.OutputContext) -> dg.AssetKey | None:
    """The table whose query writes this output's rows, when this output is a quarantine."""
    spec = TableSpec.of(context.definition_metadata)
    return dg.AssetKey(spec.quarantine_for.split(".")) if spec and spec.quarantine_for else None


def _reported_here(context: dg.OutputContext, table: TableRef) -> bool:
    """Whether this output reports ``table``, one its query wrote: it is the output's own, or
    one the step yields no output for (a routed table selected without its quarantine: the
    query wrote both all the same); else its own output, later in the step, reports it."""
    step_asset = context.step_context.assets_def
    assert step_asset is not None  # routed rows are an asset's output
    return table.key == context.asset_key or table.key not in step_asset.keys


def _consumer_stream_options(context: dg.InputContext, upstream: str) -> StreamOptions:
    """The options the asset the input is loaded for reads ``upstream`` with as a stream (a
    table asset keeps them in its spec); the defaults outside an asset step."""
    step = context.step_context if context.has_asset_key else None
    assets_def = getattr(step, "assets_def", None) if step is not None else None
    for spec in (TableSpec.of(asset_spec.metadata) for asset_spec in (assets_def.specs if assets_def else ())):
        if spec is not None and upstream in spec.stream_options:
            return spec.options_of(upstream)
    return StreamOptions()


def _handler_for(obj: Any, table: TableRef) -> tuple[Handler, bool]:
    """The handler for what an asset returned, and whether it writes (under the tables'
    locks, after a full refresh) or only reports."""
    if isinstance(obj, QuarantineOf):
        return report_quarantine, False
    if isinstance(obj, TableKept):
        return report_kept, False
    if isinstance(obj, RoutedRows):
        return write_routed, True
    if isinstance(obj, IncrementalSource):
        return write_ingestion, True
    if isinstance(obj, AppendFlows):
        return write_flows, True
    if isinstance(obj, SnapshotSource):
        return write_snapshots, True
    if isinstance(obj, ExpectedRows):
        return (write_stream if obj.rows.isStreaming else write_batch), True
    raise LakehouseError(
        f"Asset {table.table_name} returned {type(obj).__name__}; a table asset returns a "
        "Spark DataFrame (streaming or batch)"
    )
