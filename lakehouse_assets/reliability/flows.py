"""What the invariants check, read from the tables' declarations: which bronze table ingests
which landing folder, which table routes which source into itself and its quarantine, and
which table kept incrementally must equal which batch query.

Every table declared the way the reference tables are is checked as they are: nothing here
names a table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from lakehouse_assets.assets.discovery import declared_tables, package_assets, project_packages, table_specs
from lakehouse_assets.assets.landing import streamed_folder
from lakehouse_assets.pipelines.assets import pipeline_assets
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import LANDING_FOLDERS


@dataclass(frozen=True)
class Ingestion:
    """Bronze table ``bronze`` streams every file landing in ``landing/<landing_source>`` (those
    ``pattern`` names), each record into itself or its ``quarantine``."""

    bronze: str
    landing_source: str
    format: str
    header: bool = False
    multi_line: bool = False
    #: The files of the folder it reads (``batch_*/orders.csv``), when not all of them.
    pattern: str | None = None
    #: Where the records its expectations drop go (a routed ingestion): each landed record is
    #: in the table or there.
    quarantine: str | None = None


@dataclass(frozen=True)
class Routing:
    """``table`` streams ``source`` and routes each of its rows either into itself or into
    ``quarantine``, in one query."""

    table: str
    quarantine: str
    source: str


@dataclass(frozen=True)
class Recomputation:
    """``table`` is kept incrementally, and must hold the rows ``query`` computes in batch from
    the tables it reads, one per value of its ``keys``."""

    table: str
    keys: tuple[str, ...]
    query: str


@dataclass(frozen=True)
class Flows:
    """The record flows of a lakehouse's declared tables."""

    ingestions: tuple[Ingestion, ...] = ()
    routings: tuple[Routing, ...] = ()
    recomputations: tuple[Recomputation, ...] = ()


def declared_flows(assets: Iterable[Any]) -> Flows:
    """The flows the table assets among ``assets`` declare."""
    assets = list(assets)
    specs, tables = table_specs(assets), declared_tables(assets)
    ingestions, routings, recomputations = [], [], []
    for table, spec in sorted(specs.items()):
        source = streamed_folder(spec.metadata)
        if source is not None:
            declared = spec.metadata[LANDING_FOLDERS][source]
            ingestions.append(Ingestion(table, source, str(declared.get("format", "json")),
                                        bool(declared.get("header")), bool(declared.get("multi_line")),
                                        declared.get("pattern"), tables[table].quarantine))
        declared_table = tables[table]
        streams = declared_table.streams_from
        if declared_table.quarantine and len(streams) == 1:
            routings.append(Routing(table, declared_table.quarantine, streams[0]))
        if declared_table.recomputed_by:
            recomputations.append(Recomputation(table, declared_table.keys, declared_table.recomputed_by))
    return Flows(tuple(ingestions), tuple(routings), tuple(recomputations))


def project_flows(settings: LakehouseSettings | None = None) -> Flows:
    """The flows of the project's tables: its own (``lakehouse_assets.assets``) and, with
    ``settings``, those of the packages ``LAKEHOUSE_ASSET_PACKAGES`` names and of the
    pipelines ``LAKEHOUSE_PIPELINES`` names."""
    if settings is None or not settings.pipelines:
        return _package_flows(settings.asset_packages if settings else ())
    return declared_flows([*package_assets(*project_packages(settings.asset_packages)),
                           *(asset for folder in settings.pipelines for asset in pipeline_assets(folder, settings))])


@cache
def _package_flows(names: tuple[str, ...]) -> Flows:
    return declared_flows(package_assets(*project_packages(names)))
