"""Reliability: the exactly-once invariants, checked on the tables as they are stored
(``check_all``, ``lakehouse verify``), and where a row came from (:mod:`.provenance`,
``lakehouse trace``).
"""

from lakehouse_assets.reliability.flows import Flows, declared_flows
from lakehouse_assets.reliability.invariants import check_all
from lakehouse_assets.reliability.report import InvariantReport, InvariantResult, Violation

__all__ = ["Flows", "InvariantReport", "InvariantResult", "Violation", "check_all", "declared_flows"]
