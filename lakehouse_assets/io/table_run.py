"""Resolving one output of a table asset, once: which table, which checkpoint, which locks,
how it is written and triggered.

Everything a handler needs comes from the asset key, the asset's definition metadata (what
``table_asset`` declared) and the run's config; :func:`resolve_table_run` reads them in one
place, and the handlers only ever see the resulting :class:`TableRun`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.ingestion.files import landed_listing
from lakehouse_assets.location import Location
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import TableRunConfig, TableSpec
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.storage.batch_record import READING_KEY
from lakehouse_assets.storage.sink import RunStamp
from lakehouse_assets.streaming import Trigger
from lakehouse_assets.tables.reading import tables_now


@dataclass(frozen=True)
class TableRef:
    """Where one table and its machinery live: ``root/<layer>/<name>``, its query's checkpoint
    and its stored schema."""

    layer: str
    name: str
    path: Location
    checkpoint: Location
    schema_location: Location

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
    #: The lakehouse the run writes.
    settings: LakehouseSettings
    run_id: str | None
    full_refresh: bool
    trigger: Trigger
    #: The table as its asset declares it.
    spec: TableSpec

    @property
    def root(self) -> Location:
        """The lakehouse's folder."""
        return self.settings.root

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

    def stamp_metadata(self, store: DeltaTableStore) -> dict[str, str]:
        """What a batch write of this run records in its commit besides its rows: the run, and
        what it read (the tables and landed files it reads in batch, as they are now)."""
        landed = {source: landed_listing(self.settings.landing_path(source)) for source in self.spec.landing}
        reading = tables_now((*self.spec.reads, *self.spec.streams_from), self.settings, store, landed)
        return RunStamp(self.run_id or "", reading=reading).metadata() if self.run_id else (
            {READING_KEY: reading.to_json()} if reading is not None else {})

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
        return table_run_of(context.asset_key, TableSpec.of(context.definition_metadata), config, settings,
                            _run_id(context))
    step_asset = context.step_context.assets_def
    assert step_asset is not None  # only an asset's output has tables beside its own
    return table_run_of(key, TableSpec.of(step_asset.specs_by_key[key].metadata), config, settings, _run_id(context))


def table_run_of(key: dg.AssetKey, spec: TableSpec | None, config: TableRunConfig, settings: LakehouseSettings,
                 run_id: str | None = None) -> TableRun:
    """The :class:`TableRun` of asset ``key`` declared as ``spec`` (None: an asset stored by
    the IO manager without a table declaration, written with the defaults), run with ``config``."""
    table = TableRef.of(key, settings)
    spec = spec or TableSpec(table.layer, table.name)
    return TableRun(
        table=table,
        quarantine=TableRef.of(dg.AssetKey(spec.quarantine.split(".")), settings) if spec.quarantine else None,
        settings=settings,
        run_id=run_id,
        full_refresh=config.full_refresh,
        trigger=Trigger(
            # The run config's choice, else the asset's own.
            kind=config.trigger if config.trigger else spec.trigger,
            interval=config.processing_time,
            timeout_seconds=config.timeout_seconds or spec.timeout_seconds,
        ),
        spec=spec,
    )


def full_refresh(store: DeltaTableStore, table: TableRef) -> None:
    """Forget everything about a table: its data, its query's checkpoint, its stored schema."""
    store.drop(str(table.path))
    for folder in (table.checkpoint, table.schema_location):
        folder.remove()


def _run_id(context: dg.OutputContext) -> str | None:
    """The Dagster run writing, when there is one."""
    try:
        return context.run_id
    except Exception:  # noqa: BLE001 - an output context built outside a run has none
        return None


def _op_config(context: dg.OutputContext) -> dict[str, Any] | None:
    step = context.step_context
    return dict(step.op_config or {}) if step is not None else None
