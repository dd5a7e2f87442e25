"""When silver and gold materialize by themselves: the automation condition their assets
declare (the automation sensor in :mod:`lakehouse_assets.sensors.automation` evaluates it)."""

from __future__ import annotations

import dagster as dg


def downstream_of_new_data() -> dg.AutomationCondition[dg.AssetKey | dg.AssetCheckKey]:
    """Materialize when an upstream table has new data, and never over a failed blocking
    check: plain ``eager()`` still requests downstream after a blocking check failed in an
    earlier run, so the checks' verdict is required explicitly."""
    return (dg.AutomationCondition.eager() & dg.AutomationCondition.all_deps_blocking_checks_passed()).with_label(
        "new upstream data, upstream checks passed"
    )
