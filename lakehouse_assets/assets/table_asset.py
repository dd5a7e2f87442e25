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
from pydantic import Field
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from lakehouse_assets.assets.nothing_to_read import Keep, TableKept, log_skip, nothing_to_read
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.quality.contract import DescribedColumn
from lakehouse_assets.quality.rules import Rule, Severity
from lakehouse_assets.storage import OutputMode, StreamOptions, TableLayout, WriteMode, type_sql
from lakehouse_assets.streaming import RestartPolicy, TriggerKind
from lakehouse_assets.tables.sql_types import UnknownTypeError, spark_type

IO_MANAGER_KEY = "delta_io_manager"
# The same IO manager, loading its inputs as streams: an input says how it wants the
# upstream table by the manager it names (Dagster allows no other input properties on a
# multi-asset's dependencies).
STREAM_INPUT_KEY = "delta_stream_input"
SPARK_POOL = "spark"
DEFAULT_OWNER = "team:data-engineering"

# Definition metadata that the Delta IO manager reads; shown in the UI as well.
OUTPUT_MODE = "lakehouse/output_mode"
WRITE_MODE = "lakehouse/write_mode"
MERGE_KEYS = "lakehouse/merge_keys"
MERGE_SCHEMA = "lakehouse/merge_schema"
TRIGGER = "lakehouse/trigger"
TIMEOUT_SECONDS = "lakehouse/timeout_seconds"
COLUMN_LINEAGE = "lakehouse/column_lineage"  # a SQL asset's, read from its SQL
#: ``{column: description}``: what each column holds, reported with every materialization.
COLUMN_DESCRIPTIONS = "lakehouse/column_descriptions"
#: ``{column: Spark SQL type}``: the types declared for columns, which every write casts to.
COLUMN_TYPES = "lakehouse/column_types"
QUARANTINE_TABLE = "lakehouse/quarantine_table"  # on a routed table: where failing rows go
QUARANTINE_FOR = "lakehouse/quarantine_for"  # on a quarantine table: whose failing rows it holds
# On a table read from streams: the options of each, by upstream table (``layer.name``).
STREAM_OPTIONS = "lakehouse/stream_options"
STREAMS_FROM = "lakehouse/streams_from"  # the tables read as streams (layer.name), in order
# The expectations its writes enforce: name, on violation, condition, columns.
EXPECTATIONS = "lakehouse/expectations"
#: On an AUTO CDC table: how its change feed is applied (an AutoCdc, as a dict).
AUTO_CDC = "lakehouse/auto_cdc"
#: On a grouped table kept incrementally: what it groups by and measures (an
#: IncrementalAggregate, as a dict).
INCREMENTAL_AGGREGATE = "lakehouse/incremental_aggregate"
#: On a table kept incrementally: the batch query its rows must equal (``lakehouse verify``).
RECOMPUTED_BY = "lakehouse/recomputed_by"
#: Delta table properties the table is created with (``delta.enableChangeDataFeed``, ...).
TABLE_PROPERTIES = "lakehouse/table_properties"
#: The columns the table is partitioned by (folders), or clustered by (Delta's liquid clustering).
PARTITIONED_BY = "lakehouse/partitioned_by"
CLUSTERED_BY = "lakehouse/clustered_by"


class TableRunConfig(dg.Config):
    """Run configuration every table asset accepts (in the Launchpad: ``ops: <asset>: config``)."""

    full_refresh: bool = Field(
        default=False,
        description="Clear the table, its checkpoint and stored schema, then rebuild it from its source",
    )
    trigger: TriggerKind | None = Field(
        default=None,
        description="availableNow, once or processingTime; default: the asset's own trigger",
    )
    processing_time: str = Field(default="10 seconds", description="Interval of a processingTime trigger")
    timeout_seconds: float | None = Field(
        default=None, description="How long a processingTime trigger keeps the query running"
    )


@dataclass(frozen=True)
class IncrementalSource:
    """What an ingestion asset returns: how to build its streaming DataFrame, so the query
    can be rebuilt and restarted when the source's schema evolves mid-run."""

    build: Callable[[], DataFrame]
    restart_when: RestartPolicy | None = None
    # Whether anything arrived since the last run (None: cannot tell), so that a run with
    # nothing to do does not start a query.
    has_new_data: Callable[[], bool | None] | None = None
    # How many times one run may restart the query when ``restart_when`` says so.
    max_restarts: int = 3
    # The asset's expectations (WARN and FAIL), filled in from its declaration.
    expectations: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class AppendFlow:
    """One query appending to a table: its name (its checkpoint's) and how to build its
    streaming DataFrame."""

    name: str
    build: Callable[[], DataFrame]


@dataclass(frozen=True)
class AppendFlows:
    """What a table filled by several append flows returns (Lakeflow's ``@dp.append_flow``):
    each flow runs as a query of its own, with its own checkpoint, into the one table."""

    flows: tuple[AppendFlow, ...]
    # The asset's expectations (WARN and FAIL), filled in from its declaration.
    expectations: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class ColumnSource:
    """An upstream column an output column is computed from (for column lineage)."""

    table: str  # "layer.name"
    column: str


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


def stream_options_of(metadata: Mapping[str, Any], upstream: str) -> StreamOptions:
    """The options an asset (its definition ``metadata``) reads ``upstream`` with as a stream."""
    return StreamOptions(**(metadata.get(STREAM_OPTIONS) or {}).get(upstream, {}))


def split_ins(ins: Mapping[str, dg.AssetIn | StreamInput]) -> tuple[dict[str, dg.AssetIn], dict[str, Any]]:
    """Dagster's inputs, and the stream options by upstream table as definition metadata
    (a multi-asset's inputs take no metadata of their own; the IO manager reads it here)."""
    asset_ins, options, streams = {}, {}, []
    for name, given in ins.items():
        if isinstance(given, StreamInput):
            asset_ins[name] = given.asset_in
            options[given.table] = {
                k: v for k, v in dataclasses.asdict(given.options).items() if v not in (None, False)}
        else:
            asset_ins[name] = given
        key = asset_ins[name].key
        if asset_ins[name].input_manager_key == STREAM_INPUT_KEY and key is not None:
            streams.append(".".join(key.path))
    return asset_ins, {**({STREAM_OPTIONS: options} if options else {}), **({STREAMS_FROM: streams} if streams else {})}


@dataclass(frozen=True)
class ExpectedRows:
    """A table asset's DataFrame as the IO manager writes it: the body's rows and the rules
    each write enforces (WARN and FAIL; ERROR rules route rows, see :class:`RoutedRows`);
    none for a body declared without expectations."""

    rows: DataFrame
    expectations: tuple[Rule, ...]


def declared_expectations(table: str, rules: Sequence[Rule], *, can_drop: bool) -> dict[str, Any]:
    """The definition metadata listing ``rules``; refuses rules that drop rows where there is
    no quarantine to drop them into."""
    names = [r.name for r in rules]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise LakehouseError(f"{table}: expectations {repeated} are declared more than once; give each its own name")
    dropping = [r.name for r in rules if r.severity is Severity.ERROR]
    if dropping and not can_drop:
        raise LakehouseError(
            f"{table}: expectations {dropping} drop failing rows (severity ERROR), which needs a quarantine "
            "table to keep them in; declare the table with routed_table_asset(quarantine_name=...), or make "
            "them WARN (keep and count) or FAIL (fail the update)")
    return {EXPECTATIONS: [
        {"name": r.name, "on_violation": r.severity.on_violation, "description": r.description,
         "columns": list(r.columns)} for r in rules]} if rules else {}


def declared_layout(table: str, properties: Mapping[str, str] | None, partitioned_by: Sequence[str],
                    clustered_by: Sequence[str]) -> dict[str, Any]:
    """The definition metadata of the table's layout (:class:`~lakehouse_assets.storage.TableLayout`):
    its Delta properties, and its partition or clustering columns; refuses both, naming ``table``."""
    try:
        TableLayout(dict(properties or {}), tuple(partitioned_by), tuple(clustered_by))
    except LakehouseError as exc:
        raise LakehouseError(f"{table}: {exc}") from None
    return {
        **({TABLE_PROPERTIES: {str(k): str(v) for k, v in properties.items()}} if properties else {}),
        **({PARTITIONED_BY: [str(c) for c in partitioned_by]} if partitioned_by else {}),
        **({CLUSTERED_BY: [str(c) for c in clustered_by]} if clustered_by else {}),
    }


def declared_columns(columns: Sequence[DescribedColumn], table: str | None = None) -> dict[str, Any]:
    """The declared columns as the UI's Columns table shows them before any run (their types,
    as Spark names the type a table stores, and descriptions), their descriptions for the IO
    manager to report on each run, and their declared types for every write to cast to.
    Refuses a type that is not a Spark SQL type, naming the column (and ``table``)."""
    if not columns:
        return {}
    types = {c.name: _declared_type(c, table) for c in columns if c.type}
    return {
        "dagster/column_schema": dg.TableSchema(columns=[
            dg.TableColumn(c.name, types[c.name].simpleString() if c.name in types else "unknown",
                           description=c.description or None) for c in columns]),
        COLUMN_DESCRIPTIONS: {c.name: c.description for c in columns if c.description},
        **({COLUMN_TYPES: {name: type_sql(dtype) for name, dtype in types.items()}} if types else {}),
    }


def _declared_type(column: DescribedColumn, table: str | None) -> T.DataType:
    try:
        return spark_type(column.type)
    except UnknownTypeError as exc:
        raise LakehouseError(f"{table or 'A table asset'}: column {column.name!r}: {exc}") from exc


def _table_body(fn: Callable[..., Any], table: dg.AssetKey, rules: tuple[Rule, ...],
                deps: Sequence[dg.AssetKey]) -> Callable[..., Iterator[dg.Output[Any]]]:
    """``fn`` as the asset's compute function: skipped when it has nothing to read
    (:mod:`lakehouse_assets.assets.nothing_to_read`), else its DataFrame (or ingestion source)
    with ``rules`` for the IO manager. The same parameters for Dagster to read, but its
    DataFrame inputs untyped (a missing upstream table comes in as a ``MissingTable``) and no
    return type for it to check."""

    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> Iterator[dg.Output[Any]]:
        verdict = nothing_to_read(table, kwargs, deps)
        if verdict is not None:
            log_skip(table, verdict)
            if isinstance(verdict, Keep):
                yield dg.Output(TableKept(verdict.reason))
            return
        returned = fn(*args, **kwargs)
        if isinstance(returned, IncrementalSource | AppendFlows):
            returned = dataclasses.replace(returned, expectations=rules)
        elif isinstance(returned, DataFrame) and rules:
            returned = ExpectedRows(returned, rules)
        yield dg.Output(returned)

    untyped_inputs(body, fn)
    return body


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
    ``column_lineage`` is for a SQL asset's, read from its SQL.
    """

    def decorate(fn: Callable[..., Any]) -> dg.AssetsDefinition:
        table_name = name or fn.__name__
        expectation_metadata = declared_expectations(f"{layer}.{table_name}", expectations, can_drop=False)
        key = dg.AssetKey([layer, table_name])
        dep_keys = [dep if isinstance(dep, dg.AssetKey) else dg.AssetKey(list(dep)) for dep in deps]
        body = _table_body(fn, key, tuple(expectations), dep_keys)

        definition_metadata: dict[str, Any] = {
            OUTPUT_MODE: output_mode,
            WRITE_MODE: write_mode,
            MERGE_KEYS: list(merge_keys),
            MERGE_SCHEMA: merge_schema,
            TRIGGER: TriggerKind.parse(trigger).value,
            TIMEOUT_SECONDS: timeout_seconds,
            "table": f"{layer}.{table_name}",
        }
        definition_metadata.update(declared_layout(f"{layer}.{table_name}", table_properties, partitioned_by,
                                                   clustered_by))
        if column_lineage:
            definition_metadata[COLUMN_LINEAGE] = {
                column: [[source.table, source.column] for source in sources]
                for column, sources in column_lineage.items()
            }
        asset_ins, stream_options = split_ins(ins or {})
        definition_metadata.update(declared_columns(columns, f"{layer}.{table_name}"))
        definition_metadata.update(stream_options)
        definition_metadata.update(expectation_metadata)
        definition_metadata.update(metadata or {})
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
