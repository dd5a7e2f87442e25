"""Declarative automation: new bronze data flows to silver and gold, never over a failed blocking check."""

from __future__ import annotations

import dagster as dg

from lakehouse_assets.definitions import defs

BRONZE = dg.AssetKey(["bronze", "recordings"])
PATIENTS = dg.AssetKey(["silver", "patients"])
SILVER = dg.AssetKey(["silver", "recordings_enriched"])
DAILY = dg.AssetKey(["gold", "daily_patient_avg"])
DEVICES = dg.AssetKey(["gold", "device_counts"])
QUARANTINE = dg.AssetKey(["silver", "recordings_quarantine"])
TABLES = [BRONZE, PATIENTS, SILVER, QUARANTINE, DAILY, DEVICES]


@dg.asset_check(asset=SILVER, blocking=True, name="test_blocking_rule")
def failing_silver_check() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False)


def materialized(definitions: dg.Definitions, instance: dg.DagsterInstance, *keys: dg.AssetKey) -> None:
    """Materializations of ``keys``, each followed by passing evaluations of its contract checks."""
    graph = definitions.resolve_asset_graph()
    for key in keys:
        instance.report_runless_asset_event(dg.AssetMaterialization(key))
        for check in graph.asset_check_keys:
            if check.asset_key == key and check.name != "test_blocking_rule":
                instance.report_runless_asset_event(
                    dg.AssetCheckEvaluation(asset_key=key, check_name=check.name, passed=True)
                )


def settled(definitions: dg.Definitions, instance: dg.DagsterInstance) -> dg.EvaluateAutomationConditionsResult:
    """Every table materialized once, and a first evaluation that sees nothing new."""
    materialized(definitions, instance, *TABLES)
    result = dg.evaluate_automation_conditions(defs=definitions, instance=instance)
    assert result.total_requested == 0, result.get_requested_partitions
    return result


def requested(result: dg.EvaluateAutomationConditionsResult) -> set[dg.AssetKey]:
    return {key for key in TABLES if result.get_num_requested(key)}


def test_new_bronze_data_requests_silver_and_gold():
    instance = dg.DagsterInstance.ephemeral()
    first = settled(defs, instance)

    materialized(defs, instance, BRONZE)
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)

    assert requested(result) == {SILVER, QUARANTINE, DAILY, DEVICES}


def silver_updated_with_check(passed: bool) -> dg.EvaluateAutomationConditionsResult:
    """Silver materialized and its blocking check evaluated, then one automation tick."""
    definitions = dg.Definitions.merge(defs, dg.Definitions(asset_checks=[failing_silver_check]))
    instance = dg.DagsterInstance.ephemeral()
    first = settled(definitions, instance)
    materialized(definitions, instance, SILVER)
    instance.report_runless_asset_event(
        dg.AssetCheckEvaluation(
            asset_key=SILVER, check_name="test_blocking_rule", passed=passed,
            severity=dg.AssetCheckSeverity.ERROR, blocking=True,
        )
    )
    return dg.evaluate_automation_conditions(defs=definitions, instance=instance, cursor=first.cursor)


def test_a_failed_blocking_check_on_silver_keeps_gold_from_being_requested():
    assert DAILY not in requested(silver_updated_with_check(passed=False))


def test_a_passed_blocking_check_on_silver_lets_gold_run():
    assert DAILY in requested(silver_updated_with_check(passed=True))
