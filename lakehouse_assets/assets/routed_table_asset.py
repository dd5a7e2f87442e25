"""Routed tables: one append stream whose rows failing an ERROR expectation go to a
quarantine table beside it, both written by one query, both assets in the lineage."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import dagster as dg

from lakehouse_assets.assets.table_asset import (
    DEFAULT_OWNER,
    SPARK_POOL,
    StreamInput,
    after_body,
    before_body,
    declared_columns,
    declared_layout,
    declared_lineage,
    full_refresh_asked,
    not_written,
    read_in_batch,
    read_inputs,
    split_ins,
    untyped_inputs,
    with_lakehouse_resource,
)
from lakehouse_assets.engine.client import engine_errors
from lakehouse_assets.outputs import IncrementalSource, QuarantineOf, RoutedRows
from lakehouse_assets.quality.contract import DescribedColumn
from lakehouse_assets.quality.rules import Rule
from lakehouse_assets.resource import LAKEHOUSE_RESOURCE
from lakehouse_assets.spec import IO_MANAGER_KEY, ColumnSource, DeclaredExpectation, TableRunConfig, TableSpec

#: On a routed table's compute function: the rules routing its rows, for whoever runs its
#: transformation outside Dagster (``lakehouse export-sdp``'s flows).
ROUTING_RULES_ATTRIBUTE = "__lakehouse_routing_rules__"

def routed_table_asset(
    *,
    layer: str,
    name: str,
    quarantine_name: str,
    description: str,
    quarantine_description: str,
    ins: Mapping[str, dg.AssetIn | StreamInput],
    column_lineage: Mapping[str, Sequence[ColumnSource]] | None = None,
    columns: Sequence[DescribedColumn] = (),
    quarantine_columns: Sequence[DescribedColumn] = (),
    owners: Sequence[str] = (DEFAULT_OWNER,),
    automation_condition: dg.AutomationCondition[Any] | None = None,
    merge_schema: bool = True,
    expectations: Sequence[Rule] = (),
    deps: Sequence[Sequence[str]] = (),
    metadata: Mapping[str, Any] | None = None,
    table_properties: Mapping[str, str] | None = None,
    partitioned_by: Sequence[str] = (),
    clustered_by: Sequence[str] = (),
    streams_from: Sequence[str] = (),
    pipeline: str | None = None,
) -> Callable[[Callable[..., RoutedRows | IncrementalSource]], dg.AssetsDefinition]:
    """Like :func:`table_asset` for an append stream whose rows failing an ERROR expectation
    go to a quarantine table ``layer.quarantine_name``, with the names of the rules they
    failed: one query, one checkpoint, both tables written per micro-batch, each exactly
    once. The body returns :class:`RoutedRows` (a stream, or a batch recomputed whole: the
    table and its quarantine are replaced) or an ingestion's :class:`IncrementalSource`
    (every column of each landed record kept in one or the other). Both are assets, so both
    show in the lineage; either may be selected alone, and the query still writes both and
    the run reports both. WARN expectations keep the row and
    count it; FAIL ones fail the update. ``deps`` are upstream tables the body reads by name
    (not as inputs).

    A column the passing rows gain (one the body passes through from upstream) is added to
    the table with ``merge_schema`` (the default, as the seeds' ``mergeSchema``), else it
    stops the run naming it; the quarantine always takes new columns, so it stays lossless.
    ``table_properties``, ``partitioned_by`` and ``clustered_by`` lay the table out as for
    :func:`table_asset` (its quarantine is laid out by none); ``columns`` and
    ``quarantine_columns`` describe the two tables' columns; ``streams_from`` names tables the
    body reads as streams by name, besides its stream inputs; ``pipeline`` names the Lakeflow
    pipeline it is loaded from."""

    def decorate(fn: Callable[..., RoutedRows | IncrementalSource]) -> dg.AssetsDefinition:
        main_key = dg.AssetKey([layer, name])
        quarantine_key = dg.AssetKey([layer, quarantine_name])
        asset_ins, stream_options, streamed, batch_ins = split_ins(ins)
        dep_keys = [dg.AssetKey(list(dep)) for dep in deps]
        streams = (*streamed, *(t for t in streams_from if t not in streamed))
        reads, landing = read_in_batch(batch_ins, dep_keys, metadata)
        described = declared_columns(columns, f"{layer}.{name}")
        quarantine_described = declared_columns(quarantine_columns, f"{layer}.{quarantine_name}")
        table_spec = TableSpec(
            layer=layer, name=name, merge_schema=merge_schema, quarantine=f"{layer}.{quarantine_name}",
            layout=declared_layout(f"{layer}.{name}", table_properties, partitioned_by, clustered_by),
            column_types=described.types, column_descriptions=described.descriptions,
            column_lineage=declared_lineage(column_lineage),
            expectations=tuple(DeclaredExpectation.of(rule) for rule in expectations),
            streams_from=streams, stream_options=stream_options, reads=tuple(t for t in reads if t not in streams),
            landing=landing, pipeline=pipeline)
        quarantine_spec = TableSpec(
            layer=layer, name=quarantine_name, quarantine_for=table_spec.table, pipeline=pipeline,
            column_types=quarantine_described.types, column_descriptions=quarantine_described.descriptions)
        main_metadata = {**table_spec.as_metadata(), **described.ui_metadata, **(metadata or {})}
        # Either output may be left out: nothing to read skips both (and everything below them).
        common: dict[str, Any] = dict(group_name=layer, kinds={"spark", "delta"}, owners=list(owners),
                                      deps=[*(asset_in.key for asset_in in asset_ins.values()), *dep_keys],
                                      skippable=True)

        table_output, quarantine_output = f"{layer}__{name}", f"{layer}__{quarantine_name}"

        def _routed(context: dg.AssetExecutionContext | None = None, **inputs: Any) -> Iterator[dg.Output[Any]]:
            # Either table may be selected alone, but the one query writes both: the routed rows
            # go out on the table's output, or on the quarantine's when it alone is selected, and
            # the IO manager reports the table left out as materialized by this run too. (A
            # quarantine replay calls this body outside a run, without a context: both outputs.)
            selected = context.selected_asset_keys if context is not None else {main_key, quarantine_key}
            lakehouse = inputs.pop(LAKEHOUSE_RESOURCE, None) if added else inputs.get(LAKEHOUSE_RESOURCE)
            # A quarantine replay (no lakehouse resource) routes the rows it holds: there is
            # something to read.
            verdict = before_body(context, main_key, table_spec, inputs, dep_keys, lakehouse) if lakehouse else None
            if verdict is None:
                with engine_errors(lakehouse.settings()) if lakehouse else contextlib.nullcontext():
                    routed = dataclasses.replace(fn(**read_inputs(inputs)), expectations=tuple(expectations))
                verdict = None if full_refresh_asked(context) else after_body(routed)
            if verdict is not None:
                output = table_output if main_key in selected else quarantine_output
                yield from not_written(context, main_key, verdict, lakehouse, output)
                return
            if main_key not in selected:
                yield dg.Output(routed, output_name=quarantine_output)
                return
            yield dg.Output(routed, output_name=table_output)
            if quarantine_key in selected:
                yield dg.Output(QuarantineOf(main_key), output_name=quarantine_output)

        functools.update_wrapper(_routed, fn)
        setattr(_routed, ROUTING_RULES_ATTRIBUTE, tuple(expectations))
        untyped_inputs(_routed, fn)
        _with_context(_routed)
        added = with_lakehouse_resource(_routed)
        return dg.multi_asset(
            name=f"{layer}__{name}",
            specs=[
                dg.AssetSpec(main_key, description=description, metadata=main_metadata,
                             automation_condition=automation_condition, **common).with_io_manager_key(IO_MANAGER_KEY),
                dg.AssetSpec(quarantine_key, description=quarantine_description,
                             metadata={**quarantine_spec.as_metadata(), **quarantine_described.ui_metadata},
                             automation_condition=automation_condition, **common).with_io_manager_key(IO_MANAGER_KEY),
            ],
            ins=asset_ins,
            can_subset=True,
            pool=SPARK_POOL,
            config_schema=TableRunConfig.to_fields_dict(),
        )(_routed)

    return decorate


def _with_context(body: Callable[..., Any]) -> None:
    """Give ``body`` Dagster's context as its first parameter, so a run tells it which of its
    assets are selected."""
    signature = inspect.signature(body)
    context = inspect.Parameter("context", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=dg.AssetExecutionContext)
    body.__signature__ = signature.replace(parameters=[context, *signature.parameters.values()])  # type: ignore[attr-defined]
    body.__annotations__ = {"context": dg.AssetExecutionContext, **body.__annotations__}
