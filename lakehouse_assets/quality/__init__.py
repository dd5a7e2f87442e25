"""Data quality: one contract per table drives asset checks, stream routing and quarantine.

- :mod:`~lakehouse_assets.quality.rules`: row rules as Spark Columns, with a severity.
- :mod:`~lakehouse_assets.quality.contract`: a Pandera PySpark model plus its rules.
- :mod:`~lakehouse_assets.quality.bronze`, ``silver``, ``gold``: the lakehouse's contracts.
- :mod:`~lakehouse_assets.quality.evaluation`: failing-row counts and samples, from the writes' commits or one pass.
- :mod:`~lakehouse_assets.quality.expectations`: rules enforced on each batch a table writes.
- :mod:`~lakehouse_assets.quality.quarantine`: the silver stream's routing (lossless).
- :mod:`~lakehouse_assets.quality.checks`: Dagster asset checks from a contract.
"""

from importlib import import_module
from typing import Any

# Names are imported when first used: the silver sink is pickled into Spark's Python workers,
# which import this package and should not pay for Dagster (1.6 s) to route rows.
_HOMES = {
    "SCHEMA_DRIFT_CHECK": "schema_drift", "STRUCTURE_CHECK": "checks", "check_names": "checks",
    "contract_check_specs": "checks", "contract_checks": "checks",
    "Contract": "contract", "StructureError": "contract",
    "Evaluation": "evaluation", "RuleResult": "evaluation", "evaluate": "evaluation",
    "QuarantineSink": "quarantine", "quarantine_reason": "quarantine", "route": "quarantine",
    "split_routed": "quarantine",
    "Rule": "rules", "Severity": "rules", "UniqueKey": "rules",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(f"lakehouse_assets.quality.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    "split_routed",
]
