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

LANDING = "landing"
#: Definition metadata on a table reading landed files: {source: {format, description, streamed}}.
LANDING_FOLDERS = "lakehouse/landing_folders"


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
