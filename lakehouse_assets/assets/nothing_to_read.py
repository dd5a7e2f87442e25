"""When a table has nothing to read: skipped, or kept as it stands.

"Materialize all" must be green from any state of the lakehouse, and a table whose source
has not landed yet is not an error. Before a table asset's body runs, its upstream is
looked at (:func:`nothing_to_read`):

- an upstream table that does not exist yet (the Delta IO manager hands such an input in as
  :class:`MissingTable`), or a landing folder holding no files while the table itself was
  never created: the asset is **skipped**. Its step succeeds without a materialization, the
  reason is in the run's log, and Dagster skips its checks and everything below it. An empty
  table is not written: it would look like data in lineage and freshness;
- a landing folder holding no files (deleted, or emptied) under a table that exists: the
  table is **kept** as it stands (:class:`TableKept`), reported without a write, so a lookup
  is not overwritten with nothing and the tables below it still run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.ingestion.files import list_data_files
from lakehouse_assets.outputs import MissingTable
from lakehouse_assets.settings import LANDING_DIR, LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore


@dataclass(frozen=True)
class Skip:
    """The asset has nothing to read: no materialization, and why."""

    reason: str


@dataclass(frozen=True)
class Keep:
    """The asset's table stays as it is: its landing folder holds no files."""

    reason: str


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
             and not list_data_files(str(settings.landing_path(dep.path[1])), recursive=True)]
    if not empty:
        return None
    folder = f"{LANDING_DIR}/{empty[0]}"
    name = ".".join(table.path)
    if not store.exists(str(settings.table_path(*table.path))):
        return Skip(f"nothing landed in {folder} yet; the landing sensor builds it once files land there")
    return Keep(f"{folder} holds no files; {name} is kept as it stands (`lakehouse reset {name}` clears it)")


def log_skip(table: dg.AssetKey, skip: Skip | Keep) -> None:
    """Say in the run's log why ``table`` is not written: a skip is expected on a young
    lakehouse, a landing folder emptied under a built table is worth a warning."""
    log = dg.get_dagster_logger()
    if isinstance(skip, Skip):
        log.info(f"{'.'.join(table.path)} skipped: {skip.reason}")
    else:
        log.warning(f"{'.'.join(table.path)} not written: {skip.reason}")
