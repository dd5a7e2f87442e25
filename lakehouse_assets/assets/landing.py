"""The folders files land in, as external assets found from the tables that read them.

A table that reads ``$LAKEHOUSE_ROOT/landing/<source>`` depends on the asset key
``landing/<source>``: that dependency is the whole declaration. :func:`landing_specs` makes one
external asset per such key (nothing materializes it; its sensor watches it), described by
the :class:`LandingFolder` its reader declares, or by a default naming the reader.
:func:`bronze_table <lakehouse_assets.assets.bronze.bronze_table>` declares its folder itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.assets.table_asset import DEFAULT_OWNER
from lakehouse_assets.spec import LANDING_FOLDERS

LANDING = "landing"


@dataclass(frozen=True)
class LandingFolder:
    """``$LAKEHOUSE_ROOT/landing/<source>``, as the table reading it declares it: the files'
    ``format`` (json, csv, ...), what they hold, and whether the table streams them (Auto
    Loader, each file once, tracked by its checkpoint) or reads them whole in batch."""

    source: str
    format: str
    description: str | None = None
    streamed: bool = True
    #: How a file holds its records (CSV with a header line; one document per file), for
    #: whoever counts them without the reader (``lakehouse verify``).
    header: bool = False
    multi_line: bool = False
    #: The files of the folder the table reads, as a path pattern below it (``batch_*/orders.csv``,
    #: ``customers``; see :func:`~lakehouse_assets.ingestion.files.path_matches`); None for all.
    pattern: str | None = None

    @property
    def key(self) -> dg.AssetKey:
        """The landing asset's key, which the reading table depends on."""
        return dg.AssetKey([LANDING, self.source])

    def metadata(self) -> dict[str, Any]:
        """The reading table's definition metadata declaring this folder."""
        declared = dataclasses.asdict(self)
        del declared["source"]
        return {LANDING_FOLDERS: {self.source: declared}}


def landing_readers(assets: Iterable[Any]) -> dict[str, list[dg.AssetKey]]:
    """Each landing source, with the tables that depend on its folder (asset keys)."""
    readers: dict[str, list[dg.AssetKey]] = {}
    for spec in _specs(assets):
        for dep in spec.deps:
            if len(dep.asset_key.path) == 2 and dep.asset_key.path[0] == LANDING:
                readers.setdefault(dep.asset_key.path[1], []).append(spec.key)
    return readers


def downstream_tables(assets: Iterable[Any], keys: Iterable[dg.AssetKey]) -> set[dg.AssetKey]:
    """``keys`` and every table below them in ``assets``' graph."""
    children: dict[dg.AssetKey, set[dg.AssetKey]] = {}
    for spec in _specs(assets):
        for dep in spec.deps:
            children.setdefault(dep.asset_key, set()).add(spec.key)
    found, frontier = set(keys), list(keys)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def companion_readers(assets: Iterable[Any]) -> dict[str, dict[str, list[dg.AssetKey]]]:
    """For each landing source, the tables reading another landing folder that the tables
    below its readers read from too (a join's lookup), by the source they read: what a run
    carrying the source's files down needs built as well."""
    assets = list(assets)
    readers = landing_readers(assets)
    parents = {spec.key: {dep.asset_key for dep in spec.deps} for spec in _specs(assets)}
    companions: dict[str, dict[str, list[dg.AssetKey]]] = {}
    for source, own in readers.items():
        below = downstream_tables(assets, own)
        upstream: set[dg.AssetKey] = set()
        frontier = list(below)
        while frontier:
            for parent in parents.get(frontier.pop(), ()):
                if parent not in upstream and parent not in below:
                    upstream.add(parent)
                    frontier.append(parent)
        for other, tables in readers.items():
            needed = [table for table in tables if other != source and table in upstream]
            if needed:
                companions.setdefault(source, {})[other] = needed
    return companions


def declared_folders(assets: Iterable[Any]) -> dict[str, LandingFolder]:
    """The landing folders the tables declare, by source (the first declaration of each)."""
    folders: dict[str, LandingFolder] = {}
    for spec in _specs(assets):
        for source, declared in (spec.metadata.get(LANDING_FOLDERS) or {}).items():
            folders.setdefault(source, LandingFolder(source, **declared))
    return folders


def landing_specs(assets: Iterable[Any]) -> list[dg.AssetSpec]:
    """One external asset per landing folder the tables in ``assets`` read, in group ``landing``."""
    assets = list(assets)
    folders = declared_folders(assets)
    specs = []
    for source, readers in sorted(landing_readers(assets).items()):
        folder = folders.get(source)
        read_by = ", ".join(key.to_user_string() for key in readers)
        where = f"$LAKEHOUSE_ROOT/landing/{source}/"
        described = (
            f"{folder.description} Lands at {where}; read by {read_by}." if folder and folder.description
            else f"{folder.format.upper() + ' files' if folder else 'Files'} landing at {where}, read by {read_by}.")
        specs.append(dg.AssetSpec(
            key=[LANDING, source], group_name=LANDING, description=described,
            kinds={folder.format, "files"} if folder else {"files"}, owners=[DEFAULT_OWNER]))
    return specs


def _specs(assets: Iterable[Any]) -> Iterable[dg.AssetSpec]:
    for asset in assets:
        if isinstance(asset, dg.AssetsDefinition):
            yield from asset.specs


def streamed_folder(metadata: Mapping[str, Any]) -> str | None:
    """The landing source a table streams (Auto Loader), from its definition metadata; None
    when it streams none."""
    streamed = [s for s, d in (metadata.get(LANDING_FOLDERS) or {}).items() if d.get("streamed", True)]
    return streamed[0] if len(streamed) == 1 else None
