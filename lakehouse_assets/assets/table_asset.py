"""Declaring a table asset: the transformation, plus how its table is written and read.

``table_asset`` wraps Dagster's ``@asset`` with the lakehouse's conventions: the asset key
``[layer, name]`` is the table ``$LAKEHOUSE_ROOT/<layer>/<name>``, the group is the layer,
the Delta IO manager writes whatever the body returns, and Spark steps share one pool so no
two runs drive the same checkpoint at once. The body holds only the transformation.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from lakehouse_assets.assets.nothing_to_read import (
    Keep,
    Skip,
    check_sources_same,
    log_skip,
    nothing_new,
    nothing_to_read,
    observe,
)
from lakehouse_assets.cdc.spec import AutoCdc
from lakehouse_assets.engine.client import engine_errors
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.outputs import AppendFlows, ExpectedRows, IncrementalSource, TableKept, UpstreamTable
from lakehouse_assets.quality.contract import DescribedColumn
from lakehouse_assets.quality.rules import Rule
from lakehouse_assets.resource import LAKEHOUSE_RESOURCE, LakehouseResource
from lakehouse_assets.settings import LANDING_DIR
from lakehouse_assets.spec import (
    IO_MANAGER_KEY,
    LANDING_FOLDERS,
    STREAM_INPUT_KEY,
    ColumnSource,
    DeclaredExpectation,
    TableRunConfig,
    TableSpec,
)
from lakehouse_assets.storage import OutputMode, StreamOptions, TableLayout, WriteMode, type_sql
from lakehouse_assets.streaming import TriggerKind
from lakehouse_assets.tables.sql_types import UnknownTypeError, spark_type

SPARK_POOL = "spark"
DEFAULT_OWNER = "team:data-engineering"


@dataclass(frozen=True)
class StreamInput:
    """An input read as a stream with options of its own (:func:`stream_from`)."""

    asset_in: dg.AssetIn
    table: str  # layer.name
    options: StreamOptions


def stream_from(key: Sequence[str], options: StreamOptions | None = None) -> dg.AssetIn | StreamInput:
    """An input read as a stream: the rows each new upstream version adds, once. ``options``
    (Delta's source options: startingVersion, maxFilesPerTrigger, maxBytesPerTrigger,
    skipChangeCommits, ignoreDeletes, readChangeFeed) are the asset's own, shown in its
    metadata; with readChangeFeed the input is the upstream's change data feed."""
    asset_in = dg.AssetIn(key=dg.AssetKey(list(key)), input_manager_key=STREAM_INPUT_KEY)
    return asset_in if options is None else StreamInput(asset_in, ".".join(key), options)


def split_ins(ins: Mapping[str, dg.AssetIn | StreamInput]) -> tuple[dict[str, dg.AssetIn], dict[str, StreamOptions],
                                                                  tuple[str, ...], tuple[str, ...]]:
    """Dagster's inputs; the stream options by upstream table (a multi-asset's inputs take no
    metadata of their own, so the options travel in the table's spec); the tables read as
    streams (``layer.name``), in order; and those read in batch."""
    asset_ins: dict[str, dg.AssetIn] = {}
    options: dict[str, StreamOptions] = {}
    streams: list[str] = []
    batches: list[str] = []
    for name, given in ins.items():
        if isinstance(given, StreamInput):
            asset_ins[name] = given.asset_in
            options[given.table] = given.options
        else:
            asset_ins[name] = given
        key = asset_ins[name].key
        if key is not None:
            (streams if asset_ins[name].input_manager_key == STREAM_INPUT_KEY else batches).append(".".join(key.path))
    return asset_ins, options, tuple(streams), tuple(batches)


def read_in_batch(batch_ins: Sequence[str], deps: Sequence[dg.AssetKey],
                  metadata: Mapping[str, Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The tables (``layer.name``) and landing folders (by source) a table reads in batch: its
    batch inputs, the tables among its other ``deps``, and the landing folders among them its
    ``metadata`` declares read whole (not streamed: :data:`~lakehouse_assets.spec.LANDING_FOLDERS`)."""
    tables = [*batch_ins, *(".".join(d.path) for d in deps if len(d.path) == 2 and d.path[0] != LANDING_DIR)]
    declared = (metadata or {}).get(LANDING_FOLDERS) or {}
    landing = [d.path[1] for d in deps if len(d.path) == 2 and d.path[0] == LANDING_DIR
               and not declared.get(d.path[1], {}).get("streamed", True)]
    return tuple(dict.fromkeys(tables)), tuple(landing)


def declared_layout(table: str, properties: Mapping[str, str] | None, partitioned_by: Sequence[str],
                    clustered_by: Sequence[str]) -> TableLayout:
    """The table's layout (:class:`~lakehouse_assets.storage.TableLayout`): its Delta
    properties, and its partition or clustering columns; refuses both, naming ``table``."""
    try:
        return TableLayout({str(k): str(v) for k, v in (properties or {}).items()}, tuple(partitioned_by),
                           tuple(clustered_by))
    except LakehouseError as exc:
        raise LakehouseError(f"{table}: {exc}") from None


@dataclass(frozen=True)
class DeclaredColumns:
    """What a table's described columns declare: each column's description, the Spark SQL
    types declared for some (which every write casts to), and the UI's Columns table, shown
    before any run (types as Spark names the type a table stores)."""

    descriptions: dict[str, str]
    types: dict[str, str]
    ui_metadata: dict[str, Any]


def declared_columns(columns: Sequence[DescribedColumn], table: str) -> DeclaredColumns:
    """The declarations of ``columns``; refuses a type that is not a Spark SQL type, naming the
    column and ``table``."""
    if not columns:
        return DeclaredColumns({}, {}, {})
    types = {c.name: _declared_type(c, table) for c in columns if c.type}
    return DeclaredColumns(
        descriptions={c.name: c.description for c in columns if c.description},
        types={name: type_sql(dtype) for name, dtype in types.items()},
        ui_metadata={"dagster/column_schema": dg.TableSchema(columns=[
            dg.TableColumn(c.name, types[c.name].simpleString() if c.name in types else "unknown",
                           description=c.description or None) for c in columns])},
    )


def _declared_type(column: DescribedColumn, table: str) -> T.DataType:
    try:
        return spark_type(column.type)
    except UnknownTypeError as exc:
        raise LakehouseError(f"{table}: column {column.name!r}: {exc}") from exc


def declared_lineage(column_lineage: Mapping[str, Sequence[ColumnSource]] | None
                     ) -> dict[str, tuple[ColumnSource, ...]]:
    """A SQL asset's column lineage, read from its SQL, as the spec keeps it."""
    return {column: tuple(sources) for column, sources in (column_lineage or {}).items()}


def _table_body(fn: Callable[..., Any], table: dg.AssetKey, spec: TableSpec, rules: tuple[Rule, ...],
                deps: Sequence[dg.AssetKey]) -> Callable[..., Iterator[dg.Output[Any]]]:
    """``fn`` as the asset's compute function: not run when the table has nothing to read or
    nothing new (:mod:`lakehouse_assets.assets.nothing_to_read`), else its DataFrame (or
    ingestion source) with ``rules`` for the IO manager. The same parameters for Dagster to
    read, but its DataFrame inputs untyped (they come in as :class:`UpstreamTable`, read once
    the body runs, or :class:`MissingTable`) and no return type for it to check."""

    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> Iterator[dg.Output[Any]]:
        context = args[0] if args else kwargs.get("context")
        if context_added:
            args = args[1:]
            kwargs.pop("context", None)
        lakehouse = kwargs.pop(LAKEHOUSE_RESOURCE) if added else kwargs[LAKEHOUSE_RESOURCE]
        verdict = before_body(context, table, spec, kwargs, deps, lakehouse)
        if verdict is not None:
            yield from not_written(context, table, verdict, lakehouse)
            return
        settings = lakehouse.settings()
        with engine_errors(settings):  # the inputs' reads and the body's own Spark calls
            returned = fn(*args, **read_inputs(kwargs))
        verdict = None if full_refresh_asked(context) else after_body(returned)
        if verdict is not None:
            yield from not_written(context, table, verdict, lakehouse)
            return
        if isinstance(returned, IncrementalSource | AppendFlows):
            returned = dataclasses.replace(returned, expectations=rules)
        elif isinstance(returned, DataFrame) and rules:
            returned = ExpectedRows(returned, rules)
        yield dg.Output(returned)

    untyped_inputs(body, fn)
    added = with_lakehouse_resource(body)
    context_added = with_context(body)
    return body


def before_body(context: Any, table: dg.AssetKey, spec: TableSpec, inputs: Mapping[str, Any],
                deps: Sequence[dg.AssetKey], lakehouse: LakehouseResource) -> Skip | Keep | None:
    """Why the table asset ``table`` does not run its body: nothing to read, or nothing new
    since its last commit (a full refresh always runs); None when it runs."""
    settings, store = lakehouse.settings(), lakehouse.store()
    verdict = nothing_to_read(table, inputs, deps, settings, store)
    if verdict is None and not full_refresh_asked(context):
        check_sources_same(table, spec, settings, store)
        verdict = nothing_new(table, spec, settings, store, context.instance if context is not None else None)
    return verdict


def after_body(returned: Any) -> Keep | None:
    """Why a body's output is not written after all: an ingestion with no new landed file to
    read (asked once the body has said what it reads; not on a full refresh)."""
    pending = getattr(returned, "has_new_data", None)
    if callable(pending) and pending() is False:
        return Keep("no new landed file to read", expected=True)
    return None


def not_written(context: Any, table: dg.AssetKey, verdict: Skip | Keep, lakehouse: LakehouseResource | None,
                output_name: str | None = None) -> Iterator[dg.Output[Any]]:
    """What a run records of a table it does not write: the reason in its log, an observation
    of the table, and no materialization, so that Dagster skips what is below it in the run.
    A table kept as it stands that a table below it in the run still needs (one with something
    new to read) is output all the same, as a materialization without a commit: Dagster skips
    every step whose upstream yields nothing."""
    log_skip(table, verdict)
    if context is not None and lakehouse is not None:
        context.log_event(observe(table, verdict, lakehouse.settings(), lakehouse.store()))
        if isinstance(verdict, Keep) and needed_below_in_run(context, table, lakehouse):
            kept = TableKept(verdict.reason)
            yield dg.Output(kept, output_name=output_name) if output_name else dg.Output(kept)


def needed_below_in_run(context: Any, table: dg.AssetKey, lakehouse: LakehouseResource) -> bool:
    """Whether a table this run selects below ``table`` needs it output: one with something new
    to read (new rows of its other sources, which a lookup ``table`` joins; or rows it is
    behind on, say after a run that wrote ``table`` and failed further down)."""
    graph = context.job_def.asset_layer.asset_graph
    selected = set(context.run.asset_selection or graph.get_all_asset_keys())
    settings, store = lakehouse.settings(), lakehouse.store()
    below, seen = list(graph.get(table).child_keys) if graph.has(table) else [], {table}
    while below:
        key = below.pop()
        if key in seen or not graph.has(key):
            continue
        seen.add(key)
        below.extend(graph.get(key).child_keys)
        spec = TableSpec.of(graph.get(key).metadata)
        if key not in selected or spec is None or spec.quarantine_for:  # a quarantine is its table's
            continue
        if nothing_new(key, spec, settings, store, context.instance) is None:
            return True
    return False


def read_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs as the body takes them: each upstream table read now."""
    return {name: value.read() if isinstance(value, UpstreamTable) else value for name, value in inputs.items()}


def with_context(body: Callable[..., Any]) -> bool:
    """Give ``body`` Dagster's execution context as its first parameter unless the
    transformation takes it already; whether it was added (then the body keeps it to itself)."""
    signature = inspect.signature(body)
    parameters = list(signature.parameters.values())
    if parameters and parameters[0].name == "context":
        return False
    given = inspect.Parameter("context", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    body.__signature__ = signature.replace(parameters=[given, *parameters])  # type: ignore[attr-defined]
    return True


def full_refresh_asked(context: Any) -> bool:
    """Whether the run's config asks for the table to be rebuilt (then it is read anew)."""
    return context is not None and bool((context.op_execution_context.op_config or {}).get("full_refresh"))


def with_lakehouse_resource(body: Callable[..., Any]) -> bool:
    """Give ``body`` the lakehouse resource (:data:`LAKEHOUSE_RESOURCE`) as a keyword
    parameter, for the machinery around the transformation (where the tables are), unless the
    transformation takes it already; whether it was added (then the body keeps it to itself)."""
    signature = inspect.signature(body)
    if LAKEHOUSE_RESOURCE in signature.parameters:
        return False
    given = inspect.Parameter(LAKEHOUSE_RESOURCE, inspect.Parameter.KEYWORD_ONLY, annotation=LakehouseResource)
    body.__signature__ = signature.replace(parameters=[*signature.parameters.values(), given])  # type: ignore[attr-defined]
    body.__annotations__ = {**body.__annotations__, LAKEHOUSE_RESOURCE: LakehouseResource}
    return True


def untyped_inputs(body: Callable[..., Any], fn: Callable[..., Any]) -> None:
    """Give ``body`` the parameters of ``fn`` (annotations resolved in fn's own module: Dagster
    would resolve strings in this one), DataFrame inputs untyped, and no return type."""
    signature = inspect.signature(fn, eval_str=True)
    parameters = [p.replace(annotation=inspect.Parameter.empty) if p.annotation is DataFrame else p
                  for p in signature.parameters.values()]
    signature = signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty)
    body.__signature__ = signature  # type: ignore[attr-defined]
    body.__annotations__ = {name: p.annotation for name, p in signature.parameters.items()
                            if p.annotation is not inspect.Parameter.empty}


def batch_from(key: Sequence[str]) -> dg.AssetIn:
    """An input read as a batch: the upstream table as it stands (a static lookup)."""
    return dg.AssetIn(key=dg.AssetKey(list(key)))


def table_asset(
    *,
    layer: str,
    name: str | None = None,
    description: str | None = None,
    ins: Mapping[str, dg.AssetIn | StreamInput] | None = None,
    deps: Sequence[dg.AssetKey | Sequence[str]] = (),
    output_mode: OutputMode = "append",
    write_mode: WriteMode = "overwrite",
    merge_keys: Sequence[str] = (),
    merge_schema: bool = False,
    trigger: TriggerKind | str = TriggerKind.availableNow,
    timeout_seconds: float | None = None,
    column_lineage: Mapping[str, Sequence[ColumnSource]] | None = None,
    columns: Sequence[DescribedColumn] = (),
    owners: Sequence[str] = (DEFAULT_OWNER,),
    automation_condition: dg.AutomationCondition[Any] | None = None,
    check_specs: Sequence[dg.AssetCheckSpec] | None = None,
    metadata: Mapping[str, Any] | None = None,
    expectations: Sequence[Rule] = (),
    table_properties: Mapping[str, str] | None = None,
    partitioned_by: Sequence[str] = (),
    clustered_by: Sequence[str] = (),
    streams_from: Sequence[str] = (),
    auto_cdc: AutoCdc | None = None,
    recomputed_by: str | None = None,
    pipeline: str | None = None,
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """Decorate a transformation that returns a Spark DataFrame as the table ``layer.name``.

    A streaming DataFrame is run as an incremental query (``trigger``, ``output_mode``:
    append, complete, or update by ``merge_keys``) with its own checkpoint; a batch
    DataFrame is written with ``write_mode`` (overwrite, append, or merge on
    ``merge_keys``). ``name`` defaults to the function's name, ``description`` to its
    docstring. ``expectations`` (WARN: keep and count; FAIL: fail the update) are enforced
    on every batch written, their counts reported with each materialization.
    ``table_properties`` are Delta table properties the table is created with, such as
    ``{"delta.enableChangeDataFeed": "true"}`` to keep a change data feed of its updates;
    ``partitioned_by`` or ``clustered_by`` (liquid clustering), the columns it is laid out by.
    ``columns`` describe the table's columns (a contract's ``described_columns()``); a column
    declared with a type is stored as that type, every write casting it where the cast keeps
    its values and refusing the write otherwise (:mod:`lakehouse_assets.storage.declared_types`). ``column_lineage``
    declares each column's upstream columns (a SQL asset's is read from its SQL); a table
    that declares none reports none. ``streams_from`` names tables
    the body reads as streams by name (a SQL query's ``STREAM(...)``), besides its stream
    inputs. ``auto_cdc`` makes it an AUTO CDC table (:func:`~lakehouse_assets.assets.auto_cdc.auto_cdc_table`),
    ``recomputed_by`` the batch query a grouped table's rows must equal (``lakehouse verify``);
    ``pipeline`` names the Lakeflow pipeline it is loaded from.
    Everything declared here is the table's :class:`~lakehouse_assets.spec.TableSpec`.
    """

    def decorate(fn: Callable[..., Any]) -> dg.AssetsDefinition:
        table_name = name or fn.__name__
        table = f"{layer}.{table_name}"
        key = dg.AssetKey([layer, table_name])
        dep_keys = [dep if isinstance(dep, dg.AssetKey) else dg.AssetKey(list(dep)) for dep in deps]
        asset_ins, stream_options, streamed, batch_ins = split_ins(ins or {})
        streams = (*streamed, *(s for s in streams_from if s not in streamed))
        reads, landing = read_in_batch(batch_ins, dep_keys, metadata)
        described = declared_columns(columns, table)
        spec = TableSpec(
            layer=layer, name=table_name, output_mode=output_mode, write_mode=write_mode, keys=tuple(merge_keys),
            merge_schema=merge_schema, trigger=TriggerKind.parse(trigger), timeout_seconds=timeout_seconds,
            layout=declared_layout(table, table_properties, partitioned_by, clustered_by),
            column_types=described.types, column_descriptions=described.descriptions,
            column_lineage=declared_lineage(column_lineage),
            expectations=tuple(DeclaredExpectation.of(rule) for rule in expectations),
            streams_from=streams, stream_options=stream_options,
            reads=tuple(t for t in reads if t not in streams), landing=landing,
            auto_cdc=auto_cdc, recomputed_by=recomputed_by, pipeline=pipeline,
        )
        body = _table_body(fn, key, spec, tuple(expectations), dep_keys)
        definition_metadata = {**spec.as_metadata(), **described.ui_metadata, **(metadata or {})}
        return dg.asset(
            key=key,
            group_name=layer,
            description=description or (fn.__doc__ or "").strip() or None,
            ins=asset_ins,
            deps=dep_keys,
            io_manager_key=IO_MANAGER_KEY,
            kinds={"spark", "delta"},
            owners=list(owners),
            pool=SPARK_POOL,
            metadata=definition_metadata,
            # Dagster takes a DefinitionConfigSchema as it is (convert_user_facing_definition_config_schema),
            # but its stubs for @asset list only the user-facing config schema types.
            config_schema=cast(Any, TableRunConfig.to_config_schema()),
            automation_condition=automation_condition,
            check_specs=check_specs,
            # No output when there is nothing to read: the table is skipped, and so is its downstream.
            output_required=False,
        )(body)

    return decorate
