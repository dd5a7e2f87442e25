"""Lakeflow's AUTO CDC in a pipeline's Python: ``dp.create_auto_cdc_flow`` (and its older name
``dlt.apply_changes``) onto the project's AUTO CDC (:class:`~lakehouse_assets.cdc.AutoCdc`),
SCD type 1 and 2. pyspark's own takes SCD type 1 only and builds Spark Connect columns; this
one keeps the arguments as SQL text, so loading a pipeline starts nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from pyspark.pipelines.graph_element_registry import get_active_graph_element_registry
from pyspark.pipelines.source_code_location import get_caller_source_code_location
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.cdc import AutoCdc
from lakehouse_assets.cdc.snapshots import Snapshot, SnapshotSource
from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.pipelines.graph import PipelineFlow, PipelineRegistry, SnapshotFlow, location
from lakehouse_assets.pipelines.import_columns import NotSqlError, sql_text
from lakehouse_assets.pipelines.session import active_run
from lakehouse_assets.pipelines.spec import PipelineError, SourceLocation
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore


def create_auto_cdc_flow(
    target: str, source: str, keys: Sequence[str], sequence_by: str, ignore_null_updates: bool = False,
    apply_as_deletes: str | None = None, apply_as_truncates: str | None = None,
    column_list: Sequence[str] | None = None, except_column_list: Sequence[str] | None = None,
    stored_as_scd_type: int | str = 1, track_history_column_list: Sequence[str] | None = None,
    track_history_except_column_list: Sequence[str] | None = None, name: str | None = None, once: bool = False,
) -> None:
    """The change feed streamed from ``source`` applied to the streaming table ``target``
    (declared with ``dp.create_streaming_table``), by ``keys`` in ``sequence_by`` order."""
    where = location(get_caller_source_code_location(stacklevel=1))
    for given, argument in ((ignore_null_updates, "ignore_null_updates"), (once, "once")):
        if given:
            raise PipelineError(f"{where}: create_auto_cdc_flow({argument}=True) is not mapped; leave it out")
    def text(argument: str, value: Any) -> Any:
        try:
            value = sql_text(value)
        except NotSqlError as exc:
            raise PipelineError(f"{where}: create_auto_cdc_flow's {argument}: {exc}") from exc
        values = [value] if isinstance(value, str) or value is None else list(value)
        if not all(v is None or isinstance(v, str) for v in values):
            raise PipelineError(f"{where}: create_auto_cdc_flow's {argument} must be SQL text, column names or "
                                "col(...)/expr(...) written at the file's top level, not Columns a Spark session "
                                "built, so that the pipeline loads without Spark")
        return value

    keys, sequence_by = text("keys", keys), text("sequence_by", sequence_by)
    apply_as_deletes, apply_as_truncates = text("apply_as_deletes", apply_as_deletes), text(
        "apply_as_truncates", apply_as_truncates)
    column_list, except_column_list = text("column_list", column_list), text("except_column_list", except_column_list)
    track_history_column_list = text("track_history_column_list", track_history_column_list)
    track_history_except_column_list = text("track_history_except_column_list", track_history_except_column_list)
    try:
        spec = AutoCdc(keys=list(keys), sequence_by=sequence_by, stored_as_scd_type=int(stored_as_scd_type),  # type: ignore[arg-type]
                       apply_as_deletes=apply_as_deletes, apply_as_truncates=apply_as_truncates,
                       except_column_list=list(except_column_list or ()), column_list=column_list,
                       track_history_column_list=track_history_column_list,
                       track_history_except_column_list=track_history_except_column_list)
    except ConfigurationError as exc:
        raise PipelineError(f"{where}: create_auto_cdc_flow into {target!r}: {exc}") from exc
    _registry(where).register_change_flow(name or target, target, source, spec, where, change_feed)


def change_feed(table: str) -> Any:
    """The changes streamed from ``table`` in the run building an AUTO CDC flow."""
    return active_run(f"the changes of {table}").session.read_dataset(table, streaming=True)


def create_auto_cdc_from_snapshot_flow(
    target: str, source: str | Callable[[Any], tuple[DataFrame, int] | None], keys: Sequence[str],
    stored_as_scd_type: int | str = 1, track_history_column_list: Sequence[str] | None = None,
    track_history_except_column_list: Sequence[str] | None = None, name: str | None = None,
) -> None:
    """``target`` kept from full snapshots of ``source``: a table (a snapshot at each of its
    versions) or a function ``next_snapshot_and_version(latest_version)`` returning the next
    ``(DataFrame, version)`` after ``latest_version`` (None: the first), or None when there is none."""
    where = location(get_caller_source_code_location(stacklevel=1))
    if track_history_except_column_list is not None:
        raise PipelineError(f"{where}: create_auto_cdc_from_snapshot_flow(track_history_except_column_list=...) is "
                            "not mapped; name the tracked columns with track_history_column_list")
    if int(stored_as_scd_type) not in (1, 2) or not keys or not all(isinstance(k, str) for k in keys):
        raise PipelineError(f"{where}: create_auto_cdc_from_snapshot_flow into {target!r} takes keys as column names "
                            "and stored_as_scd_type 1 or 2")
    spec = SnapshotFlow(tuple(keys), int(stored_as_scd_type),
                        tuple(track_history_column_list) if track_history_column_list is not None else None)
    _registry(where).register_snapshot_flow(name or target, target, source, spec, where)


#: How many snapshots one run takes from a ``next_snapshot_and_version`` function at most.
MAX_SNAPSHOTS = 10_000


def snapshots_of(flow: PipelineFlow, spark: SparkSession, settings: LakehouseSettings,
                 store: DeltaTableStore) -> SnapshotSource:
    """The snapshots an AUTO CDC FROM SNAPSHOT flow offers this run: its table's versions, or its function's."""
    if flow.source is not None:
        # Every version of the table is offered: the one before the first new one is what
        # that one's changes are computed from; those the table holds are skipped unread.
        table = flow.source
        current = store.version(str(settings.table_path(*table.split("."))))
        return SnapshotSource(table, [
            Snapshot(version, partial(_table_version, spark, table, version), f"{table} version {version}")
            for version in range(0 if current is None else current + 1)])
    snapshots: list[Snapshot] = []
    latest: int | None = None
    while (offered := flow.func(latest)) is not None:
        frame, version = offered
        if latest is not None and version <= latest:
            raise PipelineError(f"{flow.location}: the snapshot function of flow {flow.name!r} gave version {version} "
                                f"after {latest}; versions must increase")
        snapshots.append(Snapshot(version, partial(_given, frame), f"snapshot {version}"))
        latest = version
        if len(snapshots) > MAX_SNAPSHOTS:
            raise PipelineError(f"{flow.location}: the snapshot function of flow {flow.name!r} gave more than "
                                f"{MAX_SNAPSHOTS} snapshots; does it return None when there is no next one?")
    return SnapshotSource(flow.name, snapshots)


def _registry(where: SourceLocation) -> PipelineRegistry:
    registry = get_active_graph_element_registry()
    if not isinstance(registry, PipelineRegistry):
        raise PipelineError(f"{where}: AUTO CDC flows are registered while the lakehouse loads a pipeline")
    return registry


def _given(frame: DataFrame) -> DataFrame:
    return frame


def _table_version(spark: SparkSession, table: str, version: int) -> DataFrame:
    return spark.read.option("versionAsOf", version).table(table)
