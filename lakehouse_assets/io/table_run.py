"""Resolving one output of a table asset, once: which table, which checkpoint, which locks,
how it is written and triggered.

Everything a handler needs comes from the asset key, the asset's definition metadata (what
``table_asset`` declared) and the run's config; :func:`resolve_table_run` reads them in one
place, and the handlers only ever see the resulting :class:`TableRun`.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from lakehouse_assets.aggregates import IncrementalAggregate
from lakehouse_assets.assets.table_asset import (
    AUTO_CDC,
    CLUSTERED_BY,
    COLUMN_DESCRIPTIONS,
    COLUMN_LINEAGE,
    COLUMN_TYPES,
    INCREMENTAL_AGGREGATE,
    MERGE_KEYS,
    MERGE_SCHEMA,
    OUTPUT_MODE,
    PARTITIONED_BY,
    QUARANTINE_TABLE,
    TABLE_PROPERTIES,
    TIMEOUT_SECONDS,
    TRIGGER,
    WRITE_MODE,
    TableRunConfig,
)
from lakehouse_assets.cdc import AutoCdc
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeclaredTypes, DeltaTableStore, OutputMode, TableLayout, WriteMode
from lakehouse_assets.streaming import Trigger
from lakehouse_assets.tables.sql_types import spark_type


@dataclass(frozen=True)
class TableRef:
    """Where one table and its machinery live: ``root/<layer>/<name>``, its query's checkpoint
    and its stored schema."""

    layer: str
    name: str
    path: Path
    checkpoint: Path
    schema_location: Path

    @property
    def table_name(self) -> str:
        """``layer.name``, as commands and messages name the table."""
        return f"{self.layer}.{self.name}"

    @property
    def key(self) -> dg.AssetKey:
        """The table's asset key, ``[layer, name]``."""
        return dg.AssetKey([self.layer, self.name])

    @classmethod
    def of(cls, key: dg.AssetKey, settings: LakehouseSettings) -> TableRef:
        """The table of an asset key ``[layer, name]``."""
        if len(key.path) != 2:
            raise LakehouseError(
                f"Asset {key.to_user_string()} cannot be stored by the Delta IO manager: table assets "
                "have keys [layer, name], e.g. ['silver', 'recordings_enriched']"
            )
        layer, name = key.path
        return cls(layer, name, settings.table_path(layer, name),
                   settings.checkpoint_path(layer, name), settings.schema_path(layer, name))


@dataclass(frozen=True)
class TableRun:
    """One materialization of a table asset, resolved: what to write, where, and how."""

    table: TableRef
    #: The table's quarantine, for a routed table (its query writes both).
    quarantine: TableRef | None
    root: Path
    run_id: str | None
    full_refresh: bool
    trigger: Trigger
    output_mode: OutputMode
    write_mode: WriteMode
    keys: tuple[str, ...]
    merge_schema: bool
    #: ``{column: [[layer.table, column], ...]}`` as the asset declared it (from its SQL).
    column_lineage: Mapping[str, Sequence[Sequence[str]]] | None
    #: How a change feed is applied, on an AUTO CDC table.
    auto_cdc: AutoCdc | None = None
    #: The properties and partition or clustering columns the table is created with.
    layout: TableLayout = field(default_factory=TableLayout)
    #: How a grouped table is kept incrementally, merging each batch's partial results.
    aggregate: IncrementalAggregate | None = None
    #: ``{column: description}`` from the table's contract or its SQL's column comments.
    column_descriptions: Mapping[str, str] = field(default_factory=dict)
    #: The column types its definition declares, which every write to the table casts to.
    declared: DeclaredTypes | None = None

    def column_description(self, column: str) -> str | None:
        """What the asset says ``column`` holds (names match as Spark's do, in any case)."""
        if column in self.column_descriptions:
            return self.column_descriptions[column]
        return {k.lower(): v for k, v in self.column_descriptions.items()}.get(column.lower())

    @property
    def written(self) -> tuple[TableRef, ...]:
        """Every table this run's query writes: the table, then its quarantine."""
        return (self.table,) if self.quarantine is None else (self.table, self.quarantine)

    @property
    def lock_names(self) -> list[str]:
        """The write locks this run holds: one per table written."""
        return [t.table_name for t in self.written]

    @property
    def query_name(self) -> str:
        """The streaming query's name (Spark's UI and logs): ``layer__name``."""
        return self.table.table_name.replace(".", "__")

    @property
    def lock_holder(self) -> str:
        """How a run waiting for the locks names this one."""
        who = f"Dagster run {self.run_id}" if self.run_id else "a run"
        return f"{who} writing {self.table.table_name}"


def resolve_table_run(context: dg.OutputContext, settings: LakehouseSettings,
                      key: dg.AssetKey | None = None) -> TableRun:
    """The :class:`TableRun` of the output ``context`` describes, or of another asset ``key``
    of its step (the other table of a routed table's pair)."""
    config = TableRunConfig(**(_op_config(context) or {}))
    if key is None or key == context.asset_key:
        return table_run_of(context.asset_key, context.definition_metadata or {}, config, settings, _run_id(context))
    step_asset = context.step_context.assets_def
    assert step_asset is not None  # only an asset's output has tables beside its own
    spec = step_asset.specs_by_key[key]
    return table_run_of(key, spec.metadata or {}, config, settings, _run_id(context))


def table_run_of(
    key: dg.AssetKey, spec: Mapping[str, Any], config: TableRunConfig, settings: LakehouseSettings,
    run_id: str | None = None,
) -> TableRun:
    """The :class:`TableRun` of asset ``key`` declared with definition metadata ``spec``
    (what ``table_asset`` wrote), run with ``config``."""
    quarantine = spec.get(QUARANTINE_TABLE)
    table = TableRef.of(key, settings)
    return TableRun(
        table=table,
        quarantine=TableRef.of(dg.AssetKey(str(quarantine).split(".")), settings) if quarantine else None,
        root=settings.root,
        run_id=run_id,
        full_refresh=config.full_refresh,
        trigger=Trigger(
            # The run config's choice, else the asset's own.
            kind=config.trigger if config.trigger else spec.get(TRIGGER, "availableNow"),
            interval=config.processing_time,
            timeout_seconds=config.timeout_seconds or spec.get(TIMEOUT_SECONDS),
        ),
        output_mode=spec.get(OUTPUT_MODE, "append"),
        write_mode=spec.get(WRITE_MODE, "overwrite"),
        keys=tuple(spec.get(MERGE_KEYS) or ()),
        merge_schema=bool(spec.get(MERGE_SCHEMA, False)),
        column_lineage=spec.get(COLUMN_LINEAGE),
        auto_cdc=AutoCdc(**spec[AUTO_CDC]) if spec.get(AUTO_CDC) else None,
        layout=TableLayout(dict(spec.get(TABLE_PROPERTIES) or {}), tuple(spec.get(PARTITIONED_BY) or ()),
                           tuple(spec.get(CLUSTERED_BY) or ())),
        aggregate=(IncrementalAggregate.from_metadata(spec[INCREMENTAL_AGGREGATE])
                   if spec.get(INCREMENTAL_AGGREGATE) else None),
        column_descriptions=dict(spec.get(COLUMN_DESCRIPTIONS) or {}),
        declared=_declared_types(table.table_name, spec.get(COLUMN_TYPES)),
    )


def _declared_types(table: str, types: Mapping[str, str] | None) -> DeclaredTypes | None:
    """The declared column types (``{column: Spark SQL type}``, checked when the definition
    loaded) of ``table``, or None when it declares none."""
    return DeclaredTypes(table, {column: spark_type(name) for column, name in types.items()}) if types else None


def full_refresh(store: DeltaTableStore, table: TableRef) -> None:
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


def _op_config(context: dg.OutputContext) -> dict[str, Any] | None:
    step = context.step_context
    return dict(step.op_config or {}) if step is not None else None
