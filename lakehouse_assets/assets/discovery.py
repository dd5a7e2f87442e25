"""The asset graph as declared: the table assets of a package, and what their declarations say
about each other (which landed files reach which table, through which streams).

Everything here is read from the definitions alone (keys, dependencies, definition metadata),
so the landing assets, the landing sensors and the freshness checks of a new table come from
its declaration and are never listed by hand.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any

import dagster as dg

from lakehouse_assets.assets.landing import streamed_folder
from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.quality.contract import Contract
from lakehouse_assets.quality.freshness import FreshnessPath
from lakehouse_assets.spec import TableSpec


def project_packages(names: Iterable[str]) -> list[ModuleType]:
    """The project's own asset package (``lakehouse_assets.assets``) and the packages
    ``names`` (``LAKEHOUSE_ASSET_PACKAGES``), imported."""
    import lakehouse_assets.assets

    packages = [lakehouse_assets.assets]
    for name in names:
        try:
            packages.append(importlib.import_module(name))
        except ImportError as exc:
            raise ConfigurationError(
                f"LAKEHOUSE_ASSET_PACKAGES names {name!r}, which cannot be imported ({exc}); install it in this "
                "environment or put its folder on PYTHONPATH, or remove it from LAKEHOUSE_ASSET_PACKAGES.") from exc
    return packages


def package_assets(*packages: ModuleType) -> list[dg.AssetsDefinition]:
    """Every asset defined at the top level of a module of ``packages`` (and their
    subpackages), each once: a new module under a package is found without listing it."""
    found: dict[int, dg.AssetsDefinition] = {}
    for package in packages:
        for loaded in dg.load_assets_from_package_module(package):
            if isinstance(loaded, dg.AssetsDefinition):
                found.setdefault(id(loaded), loaded)
    return list(found.values())


def package_contracts(*packages: ModuleType) -> list[Contract]:
    """The Pandera contracts the modules of ``packages`` hold at their top level, alone or in
    a tuple or list (``CONTRACTS = (...)``): each is checked on its table, found like the
    tables themselves."""
    found: dict[int, Contract] = {}
    for package in packages:
        for module in _modules(package):
            for value in vars(module).values():
                for item in value if isinstance(value, tuple | list) else (value,):
                    if isinstance(item, Contract):
                        found.setdefault(id(item), item)
    return list(found.values())


def _modules(package: ModuleType) -> Iterator[ModuleType]:
    yield package
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        yield importlib.import_module(info.name)


def table_specs(assets: Iterable[Any]) -> dict[str, dg.AssetSpec]:
    """Dagster's specs of the tables among ``assets`` (those declaring a
    :class:`~lakehouse_assets.spec.TableSpec`), by table name (``layer.name``)."""
    specs: dict[str, dg.AssetSpec] = {}
    for asset in assets:
        if isinstance(asset, dg.AssetsDefinition):
            for asset_spec in asset.specs:
                table = TableSpec.of(asset_spec.metadata)
                if table is not None:
                    specs[table.table] = asset_spec
    return specs


def declared_tables(assets: Iterable[Any]) -> dict[str, TableSpec]:
    """The :class:`~lakehouse_assets.spec.TableSpec` of each table among ``assets``, by table
    name (``layer.name``)."""
    return {spec.table: spec for asset in assets if isinstance(asset, dg.AssetsDefinition)
            for asset_spec in asset.specs if (spec := TableSpec.of(asset_spec.metadata)) is not None}


def freshness_paths(assets: Iterable[Any]) -> list[FreshnessPath]:
    """How each table's rows come from landed files: for every table (quarantines aside)
    that streams one source after another down to a bronze streaming a landing folder. A
    table reading two streams, or reading its source in batch, has none: which landed
    files it holds is not a single chain of batch offsets."""
    assets = list(assets)
    specs, tables = table_specs(assets), declared_tables(assets)
    paths = []
    for table, spec in sorted(tables.items()):
        if spec.quarantine_for:
            continue
        chain = _chain_to_landing(table, specs, tables)
        if chain is not None:
            through, source = chain
            paths.append(FreshnessPath(table, through, source))
    return paths


def _chain_to_landing(table: str, specs: Mapping[str, dg.AssetSpec],
                      tables: Mapping[str, TableSpec]) -> tuple[tuple[str, ...], str] | None:
    chain = [table]
    while (source := streamed_folder(specs[chain[-1]].metadata)) is None:
        streams = tables[chain[-1]].streams_from
        if len(streams) != 1 or streams[0] not in specs or streams[0] in chain:
            return None
        chain.append(streams[0])
    return tuple(chain[1:]), source


def declared_types(assets: Iterable[Any]) -> dict[str, dict[str, str]]:
    """Each table's declared column types (column to Spark SQL type), for the tables that
    declare any: from its SQL column list, its ``columns=`` or its contract's model."""
    return {table: dict(spec.column_types) for table, spec in declared_tables(assets).items() if spec.column_types}


def ingests_landed_files(spec: dg.AssetSpec) -> bool:
    """Whether the table is a bronze table: it streams a landing folder, raw rows and all."""
    return streamed_folder(spec.metadata) is not None


def streamed_by(assets: Iterable[Any]) -> dict[str, list[str]]:
    """Each table with the tables that read it as a stream (a routed table's quarantine with
    its table: one query writes both), Python inputs and SQL ``STREAM(...)`` alike."""
    specs = declared_tables(assets)
    readers: dict[str, list[str]] = {}
    for table, spec in specs.items():
        reading = spec.quarantine_for or table
        streams = specs[reading].streams_from if reading in specs else ()
        for source in streams:
            readers.setdefault(source, []).append(table)
    return readers


def streaming_downstream(assets: Iterable[Any], table: str) -> list[str] | None:
    """The tables that read ``table`` (``layer.name``) as a stream, and those that stream
    from them, nearest first; None if no asset defines ``table``."""
    assets = list(assets)
    if table not in table_specs(assets):
        return None
    readers = streamed_by(assets)
    found: list[str] = []
    queue = deque([table])
    while queue:
        for reader in sorted(readers.get(queue.popleft(), ())):
            if reader not in found and reader != table:
                found.append(reader)
                queue.append(reader)
    return found
