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
  is not overwritten with nothing and the tables below it still run;
- a table loaded in batch from landed files (a lookup) whose folders hold the very files
  its last materialization read (each file's path, size and modification time: the
  ``landed_files`` it recorded, :func:`landed_files`), its table unchanged since: **kept**
  too, without reading them again or writing a version that changes nothing
  (:func:`unchanged_landing`). Tables streaming landed files never record it: which files
  their query has read is its checkpoint's business.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.ingestion.files import list_data_files
from lakehouse_assets.outputs import MissingTable
from lakehouse_assets.settings import LANDING_DIR, LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.tables.upstream_versions import last_recorded

#: The materialization metadata entry of a table loaded in batch from landed files: what
#: its landing folders held when it read them (:func:`landed_files`).
LANDED_FILES = "landed_files"


@dataclass(frozen=True)
class Skip:
    """The asset has nothing to read: no materialization, and why."""

    reason: str


@dataclass(frozen=True)
class Keep:
    """The asset's table stays as it is: its landing folder holds no files (worth a
    warning), or the files its last materialization read (``expected``)."""

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


def landed_files(deps: Iterable[dg.AssetKey], settings: LakehouseSettings) -> dict[str, str]:
    """What the landing folders among ``deps`` hold, one fingerprint per folder (a digest of
    each data file's path, size and modification time): recorded by a table loaded from them
    in batch (:data:`LANDED_FILES`), so that the next run can tell nothing has landed since."""
    found = {}
    for dep in deps:
        if len(dep.path) == 2 and dep.path[0] == LANDING_DIR:
            files = list_data_files(settings.landing_path(dep.path[1]), recursive=True)
            listing = "\n".join(f"{f.relative_path}\t{f.size}\t{f.modification_time.isoformat()}" for f in files)
            found[dep.path[1]] = hashlib.sha256(listing.encode()).hexdigest()
    return found


def unchanged_landing(table: dg.AssetKey, landed: Mapping[str, str], instance: dg.DagsterInstance,
                      settings: LakehouseSettings, store: DeltaTableStore) -> Keep | None:
    """A :class:`Keep` when ``table``'s last materialization (in ``instance``) read the
    landed files ``landed`` describes and the table is still the version it wrote; else None."""
    metadata = last_recorded(instance, table) if landed else {}
    recorded, version = metadata.get(LANDED_FILES), metadata.get("delta_version")
    if not isinstance(recorded, dg.JsonMetadataValue) or recorded.data != dict(landed):
        return None
    now = store.version(str(settings.table_path(*table.path)))
    if not isinstance(version, dg.IntMetadataValue) or now != version.value:
        return None
    folders = ", ".join(f"{LANDING_DIR}/{folder}" for folder in sorted(landed))
    return Keep(f"{folders} holds the files its last run read; {'.'.join(table.path)} is kept as it stands",
                expected=True)


def log_skip(table: dg.AssetKey, skip: Skip | Keep) -> None:
    """Say in the run's log why ``table`` is not written: a skip is expected on a young
    lakehouse, and so is a lookup whose files did not change; a landing folder emptied under
    a built table is worth a warning."""
    log = dg.get_dagster_logger()
    if isinstance(skip, Skip):
        log.info(f"{'.'.join(table.path)} skipped: {skip.reason}")
    elif skip.expected:
        log.info(f"{'.'.join(table.path)} not written: {skip.reason}")
    else:
        log.warning(f"{'.'.join(table.path)} not written: {skip.reason}")
