"""The lakehouse's exactly-once promises, checked on the tables as they are stored
(on a local disk or S3-API object storage).

Each invariant is read from the Delta tables directly (their history and rows through Delta's
public interfaces, Spark-free: not the write path, so they are independent of the code they
judge), for every table its declaration puts in a flow
(:mod:`.flows`), each result naming the tables it checked:

``landed_once`` (:mod:`.landed_once`)
    Every record of every landed file is in its bronze table exactly once.
``routed`` (:mod:`.routed`)
    For every routed table: source = table + quarantine, record for record; and the
    expectation counts committed with its batches checked exactly those rows, once.
``gold_recomputed`` (:mod:`.recomputed`)
    Every table kept incrementally equals its query recomputed in batch (the one check that
    runs Spark: the declaration's SQL is the recomputation).
``versions_whole`` (:mod:`.versions_whole`)
    No table has a half-written version: every table's history reads, its versions run
    without gaps, no streaming batch is committed twice, and every data file of the latest
    snapshot exists with the size and row count its log entry states.

With ``pending_ok`` the checks accept work that a run has not done yet (files not ingested,
a table behind its source), as after a crash and before the next run: what is there must
still be whole and never duplicated.

Rows are compared in Python, so a check reads each table once into memory: fine for the
reference data set and for tests, minutes for tables of tens of millions of rows.
"""

from __future__ import annotations

from collections.abc import Callable

from lakehouse_assets.reliability.flows import Flows, project_flows
from lakehouse_assets.reliability.landed_once import LANDED_ONCE, check_landed_once
from lakehouse_assets.reliability.recomputed import GOLD_RECOMPUTED, check_gold_recomputed
from lakehouse_assets.reliability.report import InvariantReport, InvariantResult
from lakehouse_assets.reliability.routed import ROUTED, check_routed
from lakehouse_assets.reliability.versions_whole import VERSIONS_WHOLE, check_versions_whole
from lakehouse_assets.resource import LakehouseResource


def check_all(lakehouse: LakehouseResource, *, pending_ok: bool = False, flows: Flows | None = None) -> InvariantReport:
    """Check every invariant on ``lakehouse``, for the tables of ``flows`` (by default those
    the project declares: its own asset package and those of ``settings.asset_packages``).
    Spark is started only to recompute the tables kept incrementally."""
    settings = lakehouse.settings()
    declared = flows if flows is not None else project_flows(settings)
    checks: list[Callable[[], InvariantResult]] = [
        lambda: check_landed_once(settings, declared, pending_ok=pending_ok),
        lambda: check_routed(settings, declared, pending_ok=pending_ok),
        lambda: check_gold_recomputed(settings, declared, lambda: lakehouse.tables, pending_ok=pending_ok),
        lambda: check_versions_whole(settings),
    ]
    return InvariantReport([check() for check in checks])


__all__ = [
    "GOLD_RECOMPUTED", "LANDED_ONCE", "ROUTED", "VERSIONS_WHOLE",
    "check_all", "check_gold_recomputed", "check_landed_once", "check_routed",
    "check_versions_whole",
]
