"""Data quality: one contract per table drives asset checks, stream routing and quarantine.

- :mod:`~lakehouse_assets.quality.rules`: row rules as Spark Columns, with a severity.
- :mod:`~lakehouse_assets.quality.contract`: a Pandera PySpark model plus its rules.
- :mod:`~lakehouse_assets.quality.bronze`, ``silver``, ``gold``: the lakehouse's contracts.
- :mod:`~lakehouse_assets.quality.evaluation`: failing-row counts and samples in one pass.
- :mod:`~lakehouse_assets.quality.quarantine`: the silver stream's routing (lossless).
- :mod:`~lakehouse_assets.quality.checks`: Dagster asset checks from a contract.
"""

from lakehouse_assets.quality.checks import (
    SCHEMA_DRIFT_CHECK,
    STRUCTURE_CHECK,
    check_names,
    contract_check_specs,
    contract_checks,
)
from lakehouse_assets.quality.contract import Contract, StructureError
from lakehouse_assets.quality.evaluation import Evaluation, RuleResult, evaluate
from lakehouse_assets.quality.quarantine import QuarantineSink, quarantine_reason, route, split, split_routed
from lakehouse_assets.quality.rules import Rule, Severity, UniqueKey

__all__ = [
    "SCHEMA_DRIFT_CHECK",
    "STRUCTURE_CHECK",
    "Contract",
    "Evaluation",
    "QuarantineSink",
    "Rule",
    "RuleResult",
    "Severity",
    "StructureError",
    "UniqueKey",
    "check_names",
    "contract_check_specs",
    "contract_checks",
    "evaluate",
    "quarantine_reason",
    "route",
    "split",
    "split_routed",
]
