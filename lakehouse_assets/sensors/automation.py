"""Declarative automation: new upstream data flows on to silver and gold by itself."""

from __future__ import annotations

import dagster as dg

AUTOMATION_SENSOR_NAME = "lakehouse_automation_sensor"


def automation_sensor(
    target: dg.AssetSelection, *, minimum_interval_seconds: int = 30
) -> dg.AutomationConditionSensorDefinition:
    """Evaluates the assets' automation conditions; running by default, so a fresh
    ``make run`` needs no toggle in the UI."""
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR_NAME,
        target=target,
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=minimum_interval_seconds,
        description="Carries new bronze data on to silver and gold",
    )
