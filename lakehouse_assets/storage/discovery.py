"""The tables under a lakehouse root, found by looking at folders, not by loading the asset
graph: ``<root>/<layer>/<table>``, each folder that Delta (delta-rs) opens as a table. What is
on disk is what is listed, tables no asset defines any more included.
"""

from __future__ import annotations

from deltalake import DeltaTable

from lakehouse_assets.location import Location

# The medallion layers first, in the order data flows; any other layer after, by name.
_LAYER_ORDER = {"bronze": 0, "silver": 1, "gold": 2}


def is_table(path: Location) -> bool:
    """Whether the folder ``path`` holds a Delta table, on a disk or a store (Delta's own answer)."""
    return bool(DeltaTable.is_deltatable(str(path), storage_options=path.delta_rs_options))


def discover_tables(root: Location) -> list[str]:
    """Every table under ``root`` as ``layer.name``, layers in data-flow order. Folders named
    ``_…`` or ``.…`` (checkpoints, schemas, the engine) are skipped."""
    layers = _visible_folders(root)
    found: list[str] = []
    for layer in sorted(layers, key=lambda name: (_LAYER_ORDER.get(name, len(_LAYER_ORDER)), name)):
        found.extend(f"{layer}.{table}" for table in _visible_folders(root / layer) if is_table(root / layer / table))
    return found


def _visible_folders(folder: Location) -> list[str]:
    return [name for name in folder.folders() if not name.startswith(("_", "."))]
