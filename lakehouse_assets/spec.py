"""The one description of a table: :class:`TableSpec`.

``table_asset``, ``routed_table_asset``, the SQL loader and the Lakeflow loader each build a
``TableSpec``; the asset carries it in one definition-metadata entry (:data:`SPEC_KEY`, plain
JSON, so Dagster can serialize it and the UI can show it), and whoever needs it (the IO
manager, discovery, verify, the export) reads it back once with :meth:`TableSpec.of`,
typed. Nothing else parses asset metadata for what a table is.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
from pydantic import Field

from lakehouse_assets.cdc.spec import AutoCdc
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.quality.rules import Rule, Severity
from lakehouse_assets.storage import DeclaredTypes, OutputMode, StreamOptions, TableLayout, WriteMode
from lakehouse_assets.streaming import TriggerKind
from lakehouse_assets.tables.sql_types import spark_type

#: The definition-metadata entry holding a table asset's :class:`TableSpec`.
SPEC_KEY = "lakehouse/table_spec"
#: Definition metadata on a table reading landed files: {source: {format, description, streamed}}.
LANDING_FOLDERS = "lakehouse/landing_folders"
#: The Delta IO manager, which writes what a table asset returns.
IO_MANAGER_KEY = "delta_io_manager"
#: The same IO manager, loading its inputs as streams: an input says how it wants the
#: upstream table by the manager it names (Dagster allows no other input properties on a
#: multi-asset's dependencies).
STREAM_INPUT_KEY = "delta_stream_input"


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
class ColumnSource:
    """An upstream column an output column is computed from (for column lineage)."""

    table: str  # "layer.name"
    column: str


@dataclass(frozen=True)
class DeclaredExpectation:
    """An expectation as the table declares it (the rule itself, with its condition, travels
    with the asset's output): its name, what a violation does, and the columns it reads."""

    name: str
    on_violation: str
    description: str = ""
    columns: tuple[str, ...] = ()

    @classmethod
    def of(cls, rule: Rule) -> DeclaredExpectation:
        """The declaration of ``rule``."""
        return cls(rule.name, rule.severity.on_violation, rule.description, tuple(rule.columns))

    @property
    def drops_rows(self) -> bool:
        """Whether a failing row is dropped into the table's quarantine (ERROR)."""
        return self.on_violation == Severity.ERROR.on_violation


@dataclass(frozen=True)
class TableSpec:
    """How the table ``layer.name`` is written and read: one frozen, typed record.

    A streaming result runs as a query in ``output_mode`` (update: merged by ``keys``), a
    batch result is written with ``write_mode``; ``trigger`` (and ``timeout_seconds`` for
    processingTime) says when its micro-batches run. ``quarantine`` names the table a routed
    table's dropped rows go to, ``quarantine_for`` the table a quarantine serves.
    ``streams_from`` are the tables read as streams, ``stream_options`` their options by
    table; ``reads`` the tables read in batch (as they stand), ``landing`` the landing folders
    read in batch (by source). An AUTO CDC table has ``auto_cdc``; a grouped table kept by Spark's
    stateful aggregation has ``recomputed_by`` (the batch query its rows must equal).
    ``column_types`` are Spark SQL type names every write casts to. ``pipeline`` names the
    Lakeflow pipeline a table is loaded from (:mod:`lakehouse_assets.pipelines`)."""

    layer: str
    name: str
    output_mode: OutputMode = "append"
    write_mode: WriteMode = "overwrite"
    keys: tuple[str, ...] = ()
    merge_schema: bool = False
    trigger: TriggerKind = TriggerKind.availableNow
    timeout_seconds: float | None = None
    layout: TableLayout = field(default_factory=TableLayout)
    column_types: Mapping[str, str] = field(default_factory=dict)
    column_descriptions: Mapping[str, str] = field(default_factory=dict)
    column_lineage: Mapping[str, tuple[ColumnSource, ...]] = field(default_factory=dict)
    expectations: tuple[DeclaredExpectation, ...] = ()
    quarantine: str | None = None
    quarantine_for: str | None = None
    streams_from: tuple[str, ...] = ()
    stream_options: Mapping[str, StreamOptions] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    landing: tuple[str, ...] = ()
    auto_cdc: AutoCdc | None = None
    recomputed_by: str | None = None
    pipeline: str | None = None

    def __post_init__(self) -> None:
        names = [e.name for e in self.expectations]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise LakehouseError(f"{self.table}: expectations {repeated} are declared more than once; "
                                 "give each its own name")
        dropping = [e.name for e in self.expectations if e.drops_rows]
        if dropping and self.quarantine is None:
            raise LakehouseError(
                f"{self.table}: expectations {dropping} drop failing rows (severity ERROR), which needs a "
                "quarantine table to keep them in; declare the table with routed_table_asset(quarantine_name=...), "
                "or make them WARN (keep and count) or FAIL (fail the update)")

    @property
    def table(self) -> str:
        """``layer.name``, as commands and messages name the table."""
        return f"{self.layer}.{self.name}"

    @functools.cached_property
    def declared_types(self) -> DeclaredTypes | None:
        """The declared column types (checked when the table was declared), which every write
        casts to; None when none are declared."""
        if not self.column_types:
            return None
        return DeclaredTypes(self.table, {column: spark_type(name) for column, name in self.column_types.items()})

    def column_description(self, column: str) -> str | None:
        """What the table says ``column`` holds (names match as Spark's do, in any case)."""
        if column in self.column_descriptions:
            return self.column_descriptions[column]
        return {k.lower(): v for k, v in self.column_descriptions.items()}.get(column.lower())

    def options_of(self, upstream: str) -> StreamOptions:
        """The options ``upstream`` (``layer.name``) is read with as a stream."""
        return self.stream_options.get(upstream, StreamOptions())

    def as_metadata(self) -> dict[str, Any]:
        """The definition metadata carrying this spec: one entry, plain JSON."""
        return {SPEC_KEY: _plain(self)}

    @classmethod
    def of(cls, metadata: Mapping[str, Any] | None) -> TableSpec | None:
        """The spec an asset's definition ``metadata`` carries, or None for an asset that is
        not a lakehouse table."""
        data = (metadata or {}).get(SPEC_KEY)
        if data is None:
            return None
        data = getattr(data, "data", data)  # Dagster's JsonMetadataValue, once serialized
        return cls(
            layer=data["layer"], name=data["name"], output_mode=data["output_mode"], write_mode=data["write_mode"],
            keys=tuple(data["keys"]), merge_schema=data["merge_schema"], trigger=TriggerKind(data["trigger"]),
            timeout_seconds=data["timeout_seconds"],
            layout=TableLayout(dict(data["layout"]["properties"]), tuple(data["layout"]["partitioned_by"]),
                               tuple(data["layout"]["clustered_by"])),
            column_types=dict(data["column_types"]), column_descriptions=dict(data["column_descriptions"]),
            column_lineage={column: tuple(ColumnSource(**s) for s in sources)
                            for column, sources in data["column_lineage"].items()},
            expectations=tuple(DeclaredExpectation(e["name"], e["on_violation"], e["description"],
                                                   tuple(e["columns"])) for e in data["expectations"]),
            quarantine=data["quarantine"], quarantine_for=data["quarantine_for"],
            streams_from=tuple(data["streams_from"]),
            stream_options={table: StreamOptions(**options) for table, options in data["stream_options"].items()},
            reads=tuple(data.get("reads", ())), landing=tuple(data.get("landing", ())),
            auto_cdc=AutoCdc(**data["auto_cdc"]) if data["auto_cdc"] else None,
            recomputed_by=data["recomputed_by"], pipeline=data["pipeline"],
        )


def _plain(value: Any) -> Any:
    """``value`` as JSON data: dataclasses as dicts, tuples as lists, enums as their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, TriggerKind):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    return value


__all__ = [
    "IO_MANAGER_KEY", "LANDING_FOLDERS", "SPEC_KEY", "STREAM_INPUT_KEY", "ColumnSource", "DeclaredExpectation",
    "TableRunConfig",
    "TableSpec",
]
