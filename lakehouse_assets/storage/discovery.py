"""The tables under a lakehouse root, found by looking at folders, not by loading the asset
graph: ``<root>/<layer>/<table>/_delta_log``. What is on disk is what is listed, tables no
asset defines any more included.
"""

from __future__ import annotations

from collections.abc import Callable

from lakehouse_assets.location import Location
from lakehouse_assets.settings import SYSTEM_DIR, SYSTEM_LAYER

#: The folder of a table that holds its Delta log: a folder with one is a Delta table.
DELTA_LOG = "_delta_log"

# The medallion layers first, in the order data flows; any other layer after, by name.
_LAYER_ORDER = {"bronze": 0, "silver": 1, "gold": 2}


def is_table(path: Location) -> bool:
    """Whether the folder ``path`` holds a Delta table (a Delta log), on a disk or a store."""
    return (path / DELTA_LOG).is_dir()


def discover_tables(root: Location) -> list[str]:
    """Every table under ``root`` as ``layer.name``, layers in data-flow order, then the
    machinery's own tables (``system.event_log``). Other folders named ``_…`` or ``.…``
    (checkpoints, schemas, the engine) are skipped."""
    layers = _visible_folders(root)
    found: list[str] = []
    for layer in sorted(layers, key=lambda name: (_LAYER_ORDER.get(name, len(_LAYER_ORDER)), name)):
        found.extend(f"{layer}.{table}" for table in _visible_folders(root / layer) if is_table(root / layer / table))
    system = root / SYSTEM_DIR
    found.extend(f"{SYSTEM_LAYER}.{table}" for table in _visible_folders(system) if is_table(system / table))
    return found


def _visible_folders(folder: Location) -> list[str]:
    return [name for name in folder.folders() if not name.startswith(("_", "."))]


def tables_by_id(root: Location | None, table_id: Callable[[str], str | None]) -> dict[str, str]:
    """The tables under the lakehouse ``root``, by their Delta table id (``table_id`` of a
    path): how a streaming query's offsets, which name a table by id, find its path."""
    if root is None:
        return {}
    found = {}
    for name in discover_tables(root):
        layer, table = name.split(".", 1)
        path = str(root / (SYSTEM_DIR if layer == SYSTEM_LAYER else layer) / table)
        identity = table_id(path)
        if identity is not None:
            found[identity] = path
    return found
