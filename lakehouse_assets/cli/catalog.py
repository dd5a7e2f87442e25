"""What lies under the lakehouse root (tables, landing folders, streaming checkpoints), found by
looking at folders, not by loading the asset graph: the commands see exactly what is on disk,
tables no asset defines any more included, and start without Dagster."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from lakehouse_assets.cli.arguments import TableName
from lakehouse_assets.cli.errors import CommandError, UsageError
from lakehouse_assets.errors import LakehouseError, similar_table
from lakehouse_assets.location import Location
from lakehouse_assets.settings import CHECKPOINTS_DIR, LANDING_DIR, LakehouseSettings


def require_root(settings: LakehouseSettings) -> Location:
    """The lakehouse root, which must exist."""
    if not settings.root.is_dir():
        raise CommandError(
            f"No lakehouse at {settings.root}: the folder does not exist. Set LAKEHOUSE_ROOT or "
            "pass --root to point at one, or run `lakehouse land` to start one there.")
    return settings.root


def require_table(settings: LakehouseSettings, table: TableName) -> Location:
    """The folder of an existing table; otherwise a message that names the path looked at
    and the tables that do exist."""
    from lakehouse_assets.storage.discovery import is_table

    root = require_root(settings)
    path = settings.table_path(table.layer, table.name)
    if is_table(path):
        return path
    if path.is_dir():
        raise CommandError(
            f"{path} is not a Delta table (Delta finds no table log there), so {table} cannot be "
            "read. Materialize its asset to create it, or remove the folder if it is debris.")
    if str(table) in declared_tables(settings):
        raise CommandError(
            f"No table {table} yet: nothing at {path}. It is built by its asset's first materialization once its "
            f"source has landed (`dagster asset materialize -m lakehouse_assets --select {table.layer}/{table.name}`). "
            f"{describe_known_tables(root, str(table))}")
    raise CommandError(f"No table {table}: nothing at {path}, and no asset declares it. "
                       f"{describe_known_tables(root, str(table))}")


def declared_tables(settings: LakehouseSettings) -> set[str]:
    """The tables the definitions declare (``layer.name``): the project's, and those of the
    packages and pipelines the settings name. Seconds to load: for error messages."""
    from lakehouse_assets.definitions import project_definitions

    return {".".join(key.path) for asset in project_definitions(settings).assets or []
            for key in getattr(asset, "keys", ()) if len(key.path) == 2 and key.path[0] != LANDING_DIR}


def selected_tables(settings: LakehouseSettings, table: TableName | None, every: bool) -> list[str]:
    """The tables a command acts on, as ``layer.name``: TABLE, which must exist, or with
    ``every`` (``--all``) every table under the root; exactly one of the two."""
    from lakehouse_assets.storage.discovery import discover_tables

    if (table is None) == (not every):
        raise UsageError("Give one TABLE (layer.name) or --all, not both and not neither.")
    if table is not None:
        require_table(settings, table)
        return [str(table)]
    return discover_tables(require_root(settings))


def describe_known_tables(root: Location, wanted: str) -> str:
    """A sentence on what does exist, to follow 'no such table'."""
    from lakehouse_assets.storage.discovery import discover_tables

    known = discover_tables(root)
    if not known:
        return (f"There are no tables under {root} yet: materialize the assets first, or check "
                "LAKEHOUSE_ROOT / --root.")
    similar = similar_table(wanted, known)
    hint = f"Did you mean {similar}? " if similar else ""
    return f"{hint}Tables under {root}: {', '.join(known)}."


@contextmanager
def reading(table: TableName, path: Location) -> Iterator[None]:
    """Turn delta-rs's own errors reading the table (a damaged log, a missing data file) into a
    message that names it and what to do; the project's own errors already say it."""
    try:
        yield
    except LakehouseError:
        raise
    except Exception as exc:  # noqa: BLE001 - delta-rs and pyarrow raise many types
        raise CommandError(
            f"Cannot read table {table} at {path}: {exc}. Its Delta log or data files are "
            f"damaged or missing; repair them, or rebuild it with `lakehouse reset {table}`.") from exc


def landing_sources(root: Location) -> list[Location]:
    """The source folders under ``root/landing``, by name (on object storage: the prefixes
    below it); none when there is no landing folder. Folders named ``_*`` or ``.*`` (the
    landers' locks) are not sources."""
    landing = root / LANDING_DIR
    return [landing / name for name in landing.folders() if not name.startswith(("_", "."))]


def queries(root: Location) -> list[str]:
    """The tables written by a streaming query (``layer.name``): those with a checkpoint
    folder ``root/_checkpoints/<layer>/<table>`` (only its name is looked at)."""
    base = root / CHECKPOINTS_DIR
    return [f"{layer}.{folder}" for layer in base.folders() if not layer.startswith(".")
            for folder in (base / layer).folders() if not folder.startswith(".")]
