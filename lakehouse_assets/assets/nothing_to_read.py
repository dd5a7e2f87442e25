"""When a table has nothing to read: skipped, or nothing new since its last commit.

"Materialize all" must be green from any state of the lakehouse, and a table whose source
has not landed yet is not an error. Before a table asset's body runs (and before Spark is
asked for), its upstream is looked at:

- an upstream table that does not exist yet (the Delta IO manager hands such an input in as
  :class:`MissingTable`), or a landing folder holding no files while the table itself was
  never created (:func:`nothing_to_read`): the asset is **skipped**. Its step succeeds
  without a materialization, the reason is in the run's log, and Dagster skips its checks and
  everything below it. An empty table is not written: it would look like data in lineage and
  freshness;
- a landing folder holding no files (deleted, or emptied) under a table that exists: the table
  is **kept** as it stands, with a warning, so a lookup is not overwritten with nothing;
- **nothing new** (:func:`nothing_new`): the table's newest commit records what its run read
  (:mod:`lakehouse_assets.storage.batch_record`), that run completed (Dagster's latest
  materialization of the table is its), and its sources are as it recorded them: the tables it
  streams at the same versions, or the tables and landed files it reads in batch unchanged. A
  table ingesting landed files has nothing new when every readable landed file is in it
  (:meth:`~lakehouse_assets.ingestion.AutoLoader.has_new_data`, asked once its body has said
  what it reads).

A table kept, or with nothing new, commits nothing, so its run records no materialization of
it: it records an observation (:func:`observe`) saying why, with the version it stands at.
Dagster skips what is below it in that run, which has nothing new from it either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.errors import SourceRecreatedError
from lakehouse_assets.ingestion.files import landed_listing, list_data_files
from lakehouse_assets.outputs import MissingTable
from lakehouse_assets.settings import LANDING_DIR, LakehouseSettings
from lakehouse_assets.spec import TableSpec
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.streaming import TriggerKind
from lakehouse_assets.tables.reading import completed, last_reading, tables_now


@dataclass(frozen=True)
class Skip:
    """The asset has nothing to read: no materialization, and why."""

    reason: str


@dataclass(frozen=True)
class Keep:
    """The asset's table stays as it is and commits nothing: why, and whether that is as
    expected (nothing new) or worth a warning (its landing folder holds no files)."""

    reason: str
    expected: bool = False


def nothing_to_read(table: dg.AssetKey, inputs: Mapping[str, Any], deps: Iterable[dg.AssetKey],
                    settings: LakehouseSettings, store: DeltaTableStore) -> Skip | Keep | None:
    """Whether the table asset ``table`` (``[layer, name]``), given its loaded ``inputs`` and
    its other upstream assets ``deps`` (in the lakehouse of ``settings``, its tables in
    ``store``), has nothing to read: None when it runs as usual."""
    missing = [value.table for value in inputs.values() if isinstance(value, MissingTable)]
    table_deps = [dep for dep in deps if len(dep.path) == 2 and dep.path[0] != LANDING_DIR]
    missing += [".".join(dep.path) for dep in table_deps if not store.exists(str(settings.table_path(*dep.path)))]
    if missing:
        first = missing[0]
        return Skip(f"upstream {first} has no table yet; it is built once its source lands "
                    f"(then materialize {first} and this table again)")
    empty = [dep.path[1] for dep in deps if len(dep.path) == 2 and dep.path[0] == LANDING_DIR
             and not list_data_files(settings.landing_path(dep.path[1]), recursive=True)]
    if not empty:
        return None
    folder = f"{LANDING_DIR}/{empty[0]}"
    name = ".".join(table.path)
    if not store.exists(str(settings.table_path(*table.path))):
        return Skip(f"nothing landed in {folder} yet; the landing sensor builds it once files land there")
    return Keep(f"{folder} holds no files; {name} is kept as it stands (`lakehouse reset {name}` clears it)")


def nothing_new(table: dg.AssetKey, spec: TableSpec, settings: LakehouseSettings, store: DeltaTableStore,
                instance: dg.DagsterInstance | None) -> Keep | None:
    """A :class:`Keep` when the table's sources are as its newest commit records reading them,
    and the run that made that commit completed; else None (it runs). A query on a
    ``processingTime`` trigger always runs, and so does one whose sources are undeclared."""
    if spec.trigger not in (TriggerKind.availableNow, TriggerKind.once):
        return None
    if spec.streams_from:
        now = tables_now(spec.streams_from, settings, store)
    elif spec.reads or spec.landing:
        now = tables_now(spec.reads, settings, store,
                         {source: landed_listing(settings.landing_path(source)) for source in spec.landing})
    else:
        return None
    path = str(settings.table_path(*table.path))
    commit = last_reading(store, path) if now is not None and store.exists(path) else None
    if now is None or commit is None or commit.reading != now or not completed(instance, table, commit):
        return None
    what = ", ".join([*(f"{t} at version {v.version}" for t, v in sorted(now.tables.items())),
                      *(f"{LANDING_DIR}/{source} as it was" for source in sorted(now.landed))])
    return Keep(f"nothing new since version {commit.version}: it has read {what}", expected=True)


def check_sources_same(table: dg.AssetKey, spec: TableSpec, settings: LakehouseSettings,
                       store: DeltaTableStore) -> None:
    """Raise :class:`~lakehouse_assets.errors.SourceRecreatedError` when a table the query
    streams was recreated (a full refresh: a new Delta table id) since the table's newest
    commit recorded reading it: the positions in its checkpoint are versions of the old table,
    so resuming would skip or repeat rows."""
    path = str(settings.table_path(*table.path))
    if not spec.streams_from or not store.exists(path):
        return
    commit = last_reading(store, path)
    if commit is None or commit.reading is None:
        return
    now = tables_now(spec.streams_from, settings, store)
    if now is None:
        return
    name = ".".join(table.path)
    for source, read in sorted(commit.reading.tables.items()):
        found = now.tables.get(source)
        if found is not None and found.table_id != read.table_id:
            raise SourceRecreatedError(
                f"{name} streams from {source}, which was recreated, by a full refresh, since {name} last read "
                f"it (version {commit.version} of {name} read table id {read.table_id}; it is now "
                f"{found.table_id}): the positions in checkpoint {settings.checkpoint_path(*table.path)} are "
                f"versions of the old table, so resuming would skip or repeat rows. Full-refresh {name} so it "
                f"reads its source again from the start: `lakehouse reset {name} --yes` (or run it with the "
                f"full_refresh config), and the same for the tables that stream from {name}.")


def observe(table: dg.AssetKey, verdict: Skip | Keep, settings: LakehouseSettings,
            store: DeltaTableStore) -> dg.AssetObservation:
    """What a run records of ``table`` when it commits nothing to it: an observation saying
    why, with the version the table stands at (none for a table not created yet)."""
    version = store.version(str(settings.table_path(*table.path)))
    metadata: dict[str, Any] = {"not_written": dg.MetadataValue.text(verdict.reason)}
    if version is not None:
        metadata["delta_version"] = dg.MetadataValue.int(version)
    return dg.AssetObservation(asset_key=table, metadata=metadata)


def log_skip(table: dg.AssetKey, skip: Skip | Keep) -> None:
    """Say in the run's log why ``table`` is not written: a skip is expected on a young
    lakehouse, and so is a table with nothing new; a landing folder emptied under a built table
    is worth a warning."""
    log = dg.get_dagster_logger()
    if isinstance(skip, Skip):
        log.info(f"{'.'.join(table.path)} skipped: {skip.reason}")
    elif skip.expected:
        log.info(f"{'.'.join(table.path)} not written: {skip.reason}")
    else:
        log.warning(f"{'.'.join(table.path)} not written: {skip.reason}")
