"""Reliability: the exactly-once invariants, checked on the tables as they are stored
(on a local disk or S3-API object storage).

``check_all(settings)`` reads every table with delta-rs and pyarrow and reports each broken
promise with the table and rows concerned, for the tables the declarations put in a flow
(:mod:`.flows`); ``lakehouse verify`` runs it from the command line. :mod:`.provenance`
answers the same logs' other question: where a row came from (``lakehouse trace``).
"""

from lakehouse_assets.reliability.flows import Flows, declared_flows
from lakehouse_assets.reliability.invariants import check_all
from lakehouse_assets.reliability.report import InvariantReport, InvariantResult, Violation

__all__ = ["Flows", "InvariantReport", "InvariantResult", "Violation", "check_all", "declared_flows"]
