"""Declarative automation: new upstream data flows on to silver and gold by itself."""

from __future__ import annotations

import dagster as dg

AUTOMATION_SENSOR_NAME = "lakehouse_automation_sensor"


def downstream_of_new_data() -> dg.AutomationCondition:
    """Materialize when an upstream table has new data, and never over a failed blocking
    check: plain ``eager()`` still requests downstream after a blocking check failed in an
    earlier run, so the checks' verdict is required explicitly."""
    return (dg.AutomationCondition.eager() & dg.AutomationCondition.all_deps_blocking_checks_passed()).with_label(
        "new upstream data, upstream checks passed"
    )


def automation_sensor(target: dg.AssetSelection, *, minimum_interval_seconds: int = 30) -> dg.AutomationConditionSensorDefinition:
    """Evaluates the assets' automation conditions; running by default, so a fresh
    ``make run`` needs no toggle in the UI."""
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR_NAME,
        target=target,
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=minimum_interval_seconds,
        description="Carries new bronze data on to silver and gold",
    )
