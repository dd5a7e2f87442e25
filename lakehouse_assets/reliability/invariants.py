"""The lakehouse's exactly-once promises, checked on the tables as they are stored (on a local
disk or S3-API object storage), for every table its declaration puts in a flow (:mod:`.flows`).

Each invariant (``landed_once``, ``routed``, ``gold_recomputed``, ``versions_whole``, a module
each; docs/reliability.md says what each holds) reads the Delta tables through delta-rs, not the
write path, so a bug there cannot hide itself from the check; ``gold_recomputed`` alone runs
Spark. With ``pending_ok`` the checks accept work a run has not done yet, as after a crash. Rows
are compared in Python: fine for the reference data and tests, minutes for tens of millions.
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
