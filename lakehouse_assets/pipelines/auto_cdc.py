"""Lakeflow's AUTO CDC in a pipeline's Python: ``dp.create_auto_cdc_flow`` (and its older name
``dlt.apply_changes``) onto the project's AUTO CDC (:class:`~lakehouse_assets.cdc.AutoCdc`),
SCD type 1 and 2 with Databricks' arguments. pyspark's own version takes SCD type 1 only and
builds Spark Connect columns; this one keeps the arguments as SQL text, so loading a pipeline
starts nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.pipelines.graph_element_registry import get_active_graph_element_registry
from pyspark.pipelines.source_code_location import get_caller_source_code_location

from lakehouse_assets.cdc import AutoCdc
from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.pipelines.graph import PipelineRegistry, location
from lakehouse_assets.pipelines.session import active_run
from lakehouse_assets.pipelines.spec import PipelineError, SourceLocation


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
    texts = {"keys": keys, "sequence_by": sequence_by, "apply_as_deletes": apply_as_deletes,
             "apply_as_truncates": apply_as_truncates, "column_list": column_list,
             "except_column_list": except_column_list, "track_history_column_list": track_history_column_list,
             "track_history_except_column_list": track_history_except_column_list}
    for argument, value in texts.items():
        values = [value] if isinstance(value, str) or value is None else list(value)
        if not all(v is None or isinstance(v, str) for v in values):
            raise PipelineError(f"{where}: create_auto_cdc_flow's {argument} must be written as SQL text or column "
                                "names (strings), not Columns, so that the pipeline loads without Spark")
    try:
        spec = AutoCdc(keys=list(keys), sequence_by=sequence_by, stored_as_scd_type=int(stored_as_scd_type),  # type: ignore[arg-type]
                       apply_as_deletes=apply_as_deletes, apply_as_truncates=apply_as_truncates,
                       except_column_list=list(except_column_list or ()), column_list=column_list,
                       track_history_column_list=track_history_column_list,
                       track_history_except_column_list=track_history_except_column_list)
    except ConfigurationError as exc:
        raise PipelineError(f"{where}: create_auto_cdc_flow into {target!r}: {exc}") from exc
    _registry(where).register_change_flow(name or target, target, source, spec, where, _change_feed)


def _change_feed(table: str) -> Any:
    """The changes streamed from ``table`` in the run building the flow."""
    return active_run(f"the changes of {table}").session.read_dataset(table, streaming=True)


def create_auto_cdc_from_snapshot_flow(target: str, source: Any, *_: Any, **__: Any) -> None:
    """Not mapped yet: refused where it is called."""
    where = location(get_caller_source_code_location(stacklevel=1))
    raise PipelineError(f"{where}: create_auto_cdc_from_snapshot_flow into {target!r} is not mapped yet; the project's "
                        "auto_cdc_from_snapshot_table declares the same in Python")


def _registry(where: SourceLocation) -> PipelineRegistry:
    registry = get_active_graph_element_registry()
    if not isinstance(registry, PipelineRegistry):
        raise PipelineError(f"{where}: AUTO CDC flows are registered while the lakehouse loads a pipeline")
    return registry
