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

from lakehouse_assets.aggregates.spec import IncrementalAggregate
from lakehouse_assets.assets.nothing_to_read import (
    LANDED_FILES,
    Keep,
    landed_files,
    log_skip,
    nothing_to_read,
    unchanged_landing,
)
from lakehouse_assets.cdc.spec import AutoCdc
from lakehouse_assets.engine.client import engine_errors
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.outputs import AppendFlows, ExpectedRows, IncrementalSource, TableKept
from lakehouse_assets.quality.contract import DescribedColumn
from lakehouse_assets.quality.rules import Rule
from lakehouse_assets.spark import SparkResource
from lakehouse_assets.spec import (
    IO_MANAGER_KEY,
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
#: The resource that knows where the lakehouse is (and runs its Spark session).
LAKEHOUSE_RESOURCE = "spark"
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
                                                                  tuple[str, ...]]:
    """Dagster's inputs; the stream options by upstream table (a multi-asset's inputs take no
    metadata of their own, so the options travel in the table's spec); and the tables read as
    streams (``layer.name``), in order."""
    asset_ins, options, streams = {}, {}, []
    for name, given in ins.items():
        if isinstance(given, StreamInput):
            asset_ins[name] = given.asset_in
            options[given.table] = given.options
        else:
            asset_ins[name] = given
        key = asset_ins[name].key
        if asset_ins[name].input_manager_key == STREAM_INPUT_KEY and key is not None:
            streams.append(".".join(key.path))
    return asset_ins, options, tuple(streams)


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


def _table_body(fn: Callable[..., Any], table: dg.AssetKey, rules: tuple[Rule, ...],
                deps: Sequence[dg.AssetKey]) -> Callable[..., Iterator[dg.Output[Any]]]:
    """``fn`` as the asset's compute function: skipped when it has nothing to read
    (:mod:`lakehouse_assets.assets.nothing_to_read`), else its DataFrame (or ingestion source)
    with ``rules`` for the IO manager. The same parameters for Dagster to read, but its
    DataFrame inputs untyped (a missing upstream table comes in as a ``MissingTable``) and no
    return type for it to check."""

    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> Iterator[dg.Output[Any]]:
        context = args[0] if args else kwargs.get("context")
        if context_added:
            args = args[1:]
            kwargs.pop("context", None)
        lakehouse = kwargs.pop(LAKEHOUSE_RESOURCE) if added else kwargs[LAKEHOUSE_RESOURCE]
        settings, store = lakehouse.settings(), lakehouse.store()
        verdict = nothing_to_read(table, kwargs, deps, settings, store)
        landed = landed_files(deps, settings)
        if verdict is None and landed and context is not None and not _full_refresh(context):
            verdict = unchanged_landing(table, landed, context.instance, settings, store)
        # What the landing folders held, recorded by a table loaded from them in batch.
        recorded = {LANDED_FILES: dg.MetadataValue.json(landed)} if landed else {}
        if verdict is not None:
            log_skip(table, verdict)
            if isinstance(verdict, Keep):
                yield dg.Output(TableKept(verdict.reason), metadata=recorded if verdict.expected else {})
            return
        with engine_errors(settings):  # the body's own Spark calls (a schema, a lookup read)
            returned = fn(*args, **kwargs)
            in_batch = isinstance(returned, DataFrame) and not returned.isStreaming
        if isinstance(returned, IncrementalSource | AppendFlows):
            returned = dataclasses.replace(returned, expectations=rules)
        elif isinstance(returned, DataFrame) and rules:
            returned = ExpectedRows(returned, rules)
        yield dg.Output(returned, metadata=recorded if in_batch else {})

    untyped_inputs(body, fn)
    added = with_lakehouse_resource(body)
    context_added = with_context(body)
    return body


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


def _full_refresh(context: Any) -> bool:
    """Whether the run's config asks for the table to be rebuilt (then it is read anew)."""
    return bool((context.op_execution_context.op_config or {}).get("full_refresh"))


def with_lakehouse_resource(body: Callable[..., Any]) -> bool:
    """Give ``body`` the lakehouse resource (:data:`LAKEHOUSE_RESOURCE`) as a keyword
    parameter, for the machinery around the transformation (where the tables are), unless the
    transformation takes it already; whether it was added (then the body keeps it to itself)."""
    signature = inspect.signature(body)
    if LAKEHOUSE_RESOURCE in signature.parameters:
        return False
    given = inspect.Parameter(LAKEHOUSE_RESOURCE, inspect.Parameter.KEYWORD_ONLY, annotation=SparkResource)
    body.__signature__ = signature.replace(parameters=[*signature.parameters.values(), given])  # type: ignore[attr-defined]
    body.__annotations__ = {**body.__annotations__, LAKEHOUSE_RESOURCE: SparkResource}
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
    aggregate: IncrementalAggregate | None = None,
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
    its values and refusing the write otherwise (:mod:`lakehouse_assets.storage.declared_types`). The
    column lineage is derived from the DataFrame's plan as it is written, and
    ``column_lineage`` is for a SQL asset's, read from its SQL. ``streams_from`` names tables
    the body reads as streams by name (a SQL query's ``STREAM(...)``), besides its stream
    inputs. ``auto_cdc`` makes it an AUTO CDC table (:func:`~lakehouse_assets.assets.auto_cdc.auto_cdc_table`),
    ``aggregate`` a grouped table kept incrementally, whose rows must equal ``recomputed_by``;
    ``pipeline`` names the Lakeflow pipeline it is loaded from.
    Everything declared here is the table's :class:`~lakehouse_assets.spec.TableSpec`.
    """

    def decorate(fn: Callable[..., Any]) -> dg.AssetsDefinition:
        table_name = name or fn.__name__
        table = f"{layer}.{table_name}"
        key = dg.AssetKey([layer, table_name])
        dep_keys = [dep if isinstance(dep, dg.AssetKey) else dg.AssetKey(list(dep)) for dep in deps]
        body = _table_body(fn, key, tuple(expectations), dep_keys)
        asset_ins, stream_options, streamed = split_ins(ins or {})
        described = declared_columns(columns, table)
        spec = TableSpec(
            layer=layer, name=table_name, output_mode=output_mode, write_mode=write_mode, keys=tuple(merge_keys),
            merge_schema=merge_schema, trigger=TriggerKind.parse(trigger), timeout_seconds=timeout_seconds,
            layout=declared_layout(table, table_properties, partitioned_by, clustered_by),
            column_types=described.types, column_descriptions=described.descriptions,
            column_lineage=declared_lineage(column_lineage),
            expectations=tuple(DeclaredExpectation.of(rule) for rule in expectations),
            streams_from=(*streamed, *(s for s in streams_from if s not in streamed)),
            stream_options=stream_options, auto_cdc=auto_cdc, aggregate=aggregate, recomputed_by=recomputed_by,
            pipeline=pipeline,
        )
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
