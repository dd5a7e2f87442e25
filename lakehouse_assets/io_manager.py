"""The Delta IO manager: asset key ``[layer, name]`` ↔ the Delta table ``root/layer/name``.

Given a streaming DataFrame it runs the query into the table (checkpoint under the asset's
key, exactly-once sink); given a batch DataFrame it writes it with the asset's write mode.
It loads inputs as the consuming asset asks: a stream of new rows, or the table as a batch.
It also reports what each materialization did as metadata.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import dagster as dg
from pydantic import Field
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql import DataFrame

from lakehouse_assets.assets.table_asset import (
    COLUMN_LINEAGE,
    MERGE_KEYS,
    MERGE_SCHEMA,
    OUTPUT_MODE,
    TIMEOUT_SECONDS,
    TRIGGER,
    WRITE_MODE,
    QUARANTINE_TABLE,
    IncrementalSource,
    QuarantineOf,
    RoutedRows,
    TableRunConfig,
)
from lakehouse_assets.engine.client import engine_errors
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.ingestion.state import last_committed_batch, vanished_files, vanished_message
from lakehouse_assets.quality.quarantine import QuarantineSink
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark import SparkResource
from lakehouse_assets.storage import (
    CommitResult,
    DeltaRsTableStore,
    DeltaSink,
    StreamOptions,
    TableStore,
    run_commits,
)
from lakehouse_assets.storage.checkpoint import check_sources, validate_checkpoint
from lakehouse_assets.storage.table_lock import table_locks
from lakehouse_assets.streaming import StreamRun, Trigger, run_stream


@dataclass(frozen=True)
class TableLocation:
    """Where one asset's table and its machinery live."""

    layer: str
    name: str
    path: Path
    checkpoint: Path
    schema_location: Path

    @property
    def table_name(self) -> str:
        return f"{self.layer}.{self.name}"


class DeltaIOManager(dg.ConfigurableIOManager):
    """Reads and writes table assets as Delta tables under the lakehouse root."""

    spark: SparkResource
    read_inputs_as: Literal["batch", "stream"] = Field(
        default="batch", description="Load inputs as the table as it stands, or as a stream of new rows"
    )
    lock_timeout_seconds: float = Field(
        default=900.0,
        description="How long a run waits for another run writing the same table before it fails",
    )
    def settings(self) -> LakehouseSettings:
        """Read when used, not when definitions load: ``LAKEHOUSE_ROOT`` decides."""
        return LakehouseSettings.from_env()

    def store(self) -> TableStore:
        return DeltaRsTableStore()

    def locate(self, key: dg.AssetKey) -> TableLocation:
        """The table of an asset key ``[layer, name]``."""
        if len(key.path) != 2:
            raise LakehouseError(
                f"Asset {key.to_user_string()} cannot be stored by the Delta IO manager: table assets "
                "have keys [layer, name], e.g. ['silver', 'recordings_enriched']"
            )
        layer, name = key.path
        settings = self.settings()
        return TableLocation(
            layer, name, settings.table_path(layer, name),
            settings.checkpoint_path(layer, name), settings.schema_path(layer, name),
        )

    # -- writing ------------------------------------------------------------------------------
    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        if obj is None:
            return
        with engine_errors(self.spark.settings()):
            self._handle_output(context, obj)

    def _handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        table = self.locate(context.asset_key)
        spec = context.definition_metadata or {}
        config = TableRunConfig(**(_op_config(context) or {}))
        if isinstance(obj, QuarantineOf):
            # The routed query already wrote (and, on a full refresh, first cleared) this table;
            # its log says what this run put there.
            run_id = _run_id(context)
            written = run_commits(self.store(), str(table.path), run_id) if run_id else []
            metadata = {"rows_written": dg.MetadataValue.int(sum(c.rows_written for c in written))}
            metadata.update(self._table_metadata(table, spec, None))
            context.add_output_metadata(metadata)
            return
        written = [table, self._quarantine_of(spec)] if isinstance(obj, RoutedRows) else [table]
        with table_locks(
            self.settings().root, [t.table_name for t in written],
            timeout_seconds=self.lock_timeout_seconds, holder=_holder(context, table),
        ):
            self._write_output(context, table, written, obj, spec, config)
        fault_point("asset.materialized")

    def _write_output(
        self, context: dg.OutputContext, table: TableLocation, written: list[TableLocation], obj: Any,
        spec: Mapping[str, Any], config: TableRunConfig,
    ) -> None:
        """Write ``obj`` to ``table`` (and its quarantine), holding their locks."""
        if config.full_refresh:
            for target in written:
                full_refresh(self.store(), target)
            context.log.info(f"Full refresh of {table.table_name}: cleared its table, checkpoint and stored schema")
        started = time.monotonic()
        if isinstance(obj, (RoutedRows, IncrementalSource)) or (isinstance(obj, DataFrame) and obj.isStreaming):
            if not config.full_refresh:
                self._check_checkpoint(table, written)
            vanished: list[str] = []
            if not config.full_refresh and self._nothing_to_read(table, obj):
                # Starting a query costs seconds even when it reads nothing; the checkpoint
                # already says there is nothing new.
                context.log.info(f"{table.table_name}: no new input since the last run; no query started")
                run = StreamRun()
            elif isinstance(obj, RoutedRows):
                run = self._run_routed(context, table, obj, spec, config)
            elif isinstance(obj, IncrementalSource):
                run, vanished = self._run_ingestion(context, table, obj, spec, config)
            else:
                run = self._run_stream(context, table, IncrementalSource(build=lambda: obj), spec, config)
            metadata = _stream_metadata(run)
            if isinstance(obj, IncrementalSource):
                metadata["files_vanished"] = dg.MetadataValue.json(vanished)
            version = run.last_version
        elif isinstance(obj, DataFrame):
            commit = self._write_batch(table, obj, spec)
            metadata = {"rows_written": commit.rows_written}
            version = commit.version
        else:
            raise LakehouseError(
                f"Asset {table.table_name} returned {type(obj).__name__}; a table asset returns a "
                "Spark DataFrame (streaming or batch)"
            )
        metadata.update(self._table_metadata(table, spec, version))
        metadata["duration_seconds"] = dg.MetadataValue.float(round(time.monotonic() - started, 3))
        context.add_output_metadata(metadata)

    def _check_checkpoint(self, table: TableLocation, written: list[TableLocation]) -> None:
        """Stop before starting a query whose checkpoint is damaged, disagrees with the
        tables it writes, or points into an upstream table that was recreated since."""
        store = self.store()
        state = validate_checkpoint(str(table.checkpoint), [str(t.path) for t in written], store, table.table_name)
        if state is not None:
            check_sources(state, store, table.table_name, self.settings().root)

    def _nothing_to_read(self, table: TableLocation, obj: Any) -> bool:
        """Whether the checkpoint says the query has no new input (unknown counts as no)."""
        if not table.checkpoint.exists():
            return False
        if isinstance(obj, IncrementalSource) and obj.has_new_data is not None:
            unread = obj.has_new_data()
        else:
            unread = self.store().stream_has_unread_data(str(table.checkpoint))
        return unread is False

    def _quarantine_of(self, spec: Mapping[str, Any]) -> TableLocation:
        return self.locate(dg.AssetKey(str(spec[QUARANTINE_TABLE]).split(".")))

    def _run_stream(
        self, context: dg.OutputContext, table: TableLocation, source: IncrementalSource,
        spec: Mapping[str, Any], config: TableRunConfig,
    ) -> StreamRun:
        sink = DeltaSink(
            self.store(), str(table.path), str(table.checkpoint),
            output_mode=spec.get(OUTPUT_MODE, "append"),
            keys=tuple(spec.get(MERGE_KEYS) or ()),
            merge_schema=bool(spec.get(MERGE_SCHEMA, False)),
        )
        trigger = _trigger(spec, config)
        context.log.info(f"Running the {trigger.kind} query of {table.table_name} (checkpoint {table.checkpoint})")
        return run_stream(
            source.build, sink,
            checkpoint_location=str(table.checkpoint),
            trigger=trigger,
            query_name=table.table_name.replace(".", "__"),
            restart_when=source.restart_when,
            run_id=_run_id(context),
        )

    def _run_ingestion(
        self, context: dg.OutputContext, table: TableLocation, source: IncrementalSource,
        spec: Mapping[str, Any], config: TableRunConfig,
    ) -> tuple[StreamRun, list[str]]:
        """Run an ingestion query (a file stream), and name the files it skipped because they
        were deleted after its listing took them and before they were read: their records
        are not in the table, and only this warning says so."""
        done_before = last_committed_batch(str(table.checkpoint))
        run = self._run_stream(context, table, source, spec, config)
        vanished = vanished_files(str(table.checkpoint), after_batch=done_before)
        for path in vanished:
            context.log.warning(vanished_message(path, table.table_name))
        return run, vanished

    def _run_routed(
        self, context: dg.OutputContext, table: TableLocation, routed: RoutedRows,
        spec: Mapping[str, Any], config: TableRunConfig,
    ) -> StreamRun:
        """One query writing the passed rows to the table and the failing ones to its
        quarantine, both exactly once per micro-batch."""
        quarantine = self._quarantine_of(spec)
        store = self.store()
        sink = QuarantineSink(
            passed=DeltaSink(store, str(table.path), str(table.checkpoint)),
            quarantine=DeltaSink(store, str(quarantine.path), str(table.checkpoint)),
            passed_columns=routed.passed_columns,
            quarantine_columns=routed.quarantine_columns,
        )
        context.log.info(f"Running the availableNow query of {table.table_name} -> {quarantine.table_name} (checkpoint {table.checkpoint})")
        run = run_stream(
            lambda: routed.rows, sink,  # type: ignore[arg-type]
            checkpoint_location=str(table.checkpoint),
            trigger=_trigger(spec, config),
            query_name=table.table_name.replace(".", "__"),
            run_id=_run_id(context),
        )
        return run

    def _write_batch(self, table: TableLocation, df: DataFrame, spec: Mapping[str, Any]) -> CommitResult:
        mode = spec.get(WRITE_MODE, "overwrite")
        merge_schema = bool(spec.get(MERGE_SCHEMA, False))
        if mode == "merge":
            return self.store().merge(df, str(table.path), keys=spec.get(MERGE_KEYS) or (), merge_schema=merge_schema)
        return self.store().write(
            df, str(table.path), mode=mode, merge_schema=merge_schema, overwrite_schema=mode == "overwrite"
        )

    def _table_metadata(self, table: TableLocation, spec: Mapping[str, Any], version: int | None) -> dict[str, Any]:
        store = self.store()
        metadata: dict[str, Any] = {"table_path": dg.MetadataValue.path(str(table.path))}
        if not store.exists(str(table.path)):
            return metadata
        delta = DeltaTable(str(table.path))
        metadata["delta_version"] = dg.MetadataValue.int(delta.version())
        metadata["written_version"] = dg.MetadataValue.int(version) if version is not None else dg.MetadataValue.text("none (nothing new)")
        metadata["dagster/row_count"] = dg.MetadataValue.int(_row_count(delta))
        schema = store.schema(str(table.path))
        metadata["dagster/column_schema"] = dg.TableSchema(
            columns=[dg.TableColumn(f.name, f.dataType.simpleString()) for f in schema.fields]
        )
        lineage = spec.get(COLUMN_LINEAGE)
        if lineage:
            metadata["dagster/column_lineage"] = dg.TableColumnLineage(
                deps_by_column={
                    column: [
                        dg.TableColumnDep(asset_key=dg.AssetKey(source_table.split(".")), column_name=source_column)
                        for source_table, source_column in sources
                    ]
                    for column, sources in lineage.items()
                }
            )
        return metadata

    # -- reading ------------------------------------------------------------------------------
    def load_input(self, context: dg.InputContext) -> DataFrame:
        table = self.locate(context.asset_key)
        with engine_errors(self.spark.settings()):
            spark = self.spark.spark_session
            if self.read_inputs_as == "stream":
                return self.store().read_stream(spark, str(table.path), StreamOptions())
            return self.store().read(spark, str(table.path))


def _trigger(spec: Mapping[str, Any], config: TableRunConfig) -> Trigger:
    """The run's trigger: the run config's choice, else the asset's own."""
    return Trigger(
        kind=(config.trigger.value if config.trigger else spec.get(TRIGGER, "availableNow")),
        interval=config.processing_time,
        timeout_seconds=config.timeout_seconds or spec.get(TIMEOUT_SECONDS),
    )


def full_refresh(store: TableStore, table: TableLocation) -> None:
    """Forget everything about a table: its data, its query's checkpoint, its stored schema."""
    store.drop(str(table.path))
    for folder in (table.checkpoint, table.schema_location):
        shutil.rmtree(folder, ignore_errors=True)


def _run_id(context: dg.OutputContext) -> str | None:
    """The Dagster run writing, when there is one."""
    try:
        return context.run_id
    except Exception:  # noqa: BLE001 - an output context built outside a run has none
        return None


def _holder(context: dg.OutputContext, table: TableLocation) -> str:
    """How a waiting run names this one: the Dagster run, when there is one."""
    run_id = _run_id(context)
    return f"Dagster run {run_id} writing {table.table_name}" if run_id else f"a run writing {table.table_name}"


def _op_config(context: dg.OutputContext) -> dict[str, Any] | None:
    step = context.step_context
    return step.op_config if step is not None else None


def _row_count(table: DeltaTable) -> int:
    """Rows in the table, from the log's per-file statistics (no data files are read)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return 0
    return int(pc.sum(actions.column("num_records").cast(pa.int64())).as_py() or 0)


def _stream_metadata(run: StreamRun) -> dict[str, Any]:
    return {
        "rows_processed": dg.MetadataValue.int(run.input_rows),
        "rows_written": dg.MetadataValue.int(run.rows_written),
        "micro_batches": dg.MetadataValue.int(run.batches),
        "query_restarts": dg.MetadataValue.int(run.restarts),
        "query_id": dg.MetadataValue.text(run.query_id or ""),
    }
