"""Dagster asset checks from a contract: ``pandera_schema`` (structure), one check per rule and
unique key, and ``schema_drift``, all in one ``@multi_asset_check`` on the table's asset. They
check the rows committed since their previous evaluation, and report a rule the table's writes
already counted from the counts in its commits (see docs/quality.md).
"""

# No ``from __future__ import annotations``: Dagster reads the check function's annotations
# (context type, resource types) at definition time and needs them as objects.

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.engine.client import engine_errors
from lakehouse_assets.quality.check_history import DELTA_TABLE_ID, DELTA_VERSION, last_evaluation, plain_metadata
from lakehouse_assets.quality.contract import Contract, StructureError
from lakehouse_assets.quality.evaluation import (
    Evaluation,
    RuleResult,
    evaluate,
    markdown_table,
)
from lakehouse_assets.quality.judged import judged_by_writes, rows_covered
from lakehouse_assets.quality.rules import Rule, Severity, UniqueKey
from lakehouse_assets.quality.schema_drift import SCHEMA_DRIFT_CHECK, schema_drift_result
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.storage.changes import ChangePlan, plan_changes, read_plan

#: Check names beside the rules' own.
STRUCTURE_CHECK = "pandera_schema"

#: Metadata every check result carries (what the next evaluation reads back, too).
ROWS_CHECKED = "rows_checked"
FAILING_ROWS = "failing_rows"
FAILING_SAMPLE = "failing_sample"
VERSIONS_CHECKED = "versions_checked"
CHECKED_AFTER_VERSION = "checked_after_version"  # -1: from the table's first row
#: On a result kept from an earlier evaluation: the version the table had then.
UNCHANGED_SINCE_VERSION = "unchanged_since_version"
#: How a rule's result was found: ``write`` (the counts its writes committed) or ``scan``.
COUNTED_BY = "counted_by"
#: On a rule the writes counted: the rows their batches read (dropped ones included), and
#: those that failed it.
WRITE_ROWS = "write_rows"
WRITE_FAILING_ROWS = "write_failing_rows"

def check_names(contract: Contract) -> list[str]:
    """The names of the checks :func:`contract_checks` defines for ``contract``, in order."""
    return [STRUCTURE_CHECK, *[r.name for r in contract.rules], *[u.name for u in contract.unique], SCHEMA_DRIFT_CHECK]


def _check_specs(contract: Contract, key: dg.AssetKey, blocking: bool) -> list[dg.AssetCheckSpec]:
    """The check specs of ``contract``: ERROR checks blocking when ``blocking``, WARN never."""
    specs = [
        dg.AssetCheckSpec(
            STRUCTURE_CHECK, asset=key, blocking=blocking,
            description=f"Columns and types of {contract.table} match the Pandera model {contract.model.__name__}",
        )
    ]
    checked: list[Rule | UniqueKey] = [*contract.rules, *contract.unique]
    for rule in checked:
        specs.append(
            dg.AssetCheckSpec(
                rule.name, asset=key,
                blocking=blocking and rule.severity is not Severity.WARN,
                description=f"{rule.description} ({rule.severity.value})",
                metadata={"severity": rule.severity.value, "columns": ", ".join(rule.columns)},
            )
        )
    specs.append(
        dg.AssetCheckSpec(
            SCHEMA_DRIFT_CHECK, asset=key, blocking=False,
            description=f"Warns when the columns of {contract.table} change between materializations",
        )
    )
    return specs


def contract_checks(contract: Contract, *, blocking: bool = True) -> dg.AssetChecksDefinition:
    """Asset checks validating the table ``[layer, name]`` of ``contract`` against it, all in
    one step that uses the ``spark`` resource.

    They check the rows added since the previous evaluation (the whole table when there was
    none, when the versions since removed data, as complete-mode and overwrite writes do, or
    when an ERROR rule failed last time: the failing rows are still there, so they are
    checked again until a rewrite removes them). The table is read from
    ``<root>/<layer>/<name>`` of the asset key, where the ``lakehouse`` resource says the lakehouse is.
    """
    key = dg.AssetKey(contract.key)
    specs = _check_specs(contract, key, blocking)

    @dg.multi_asset_check(
        specs=specs,
        name=f"{'_'.join(key.path)}_contract",
        description=f"Contract of {contract.table}: {contract.description}".rstrip(": "),
        compute_kind="pandera",
        # A table not created yet gets no results at all, and one check can be run alone.
        can_subset=True,
    )
    def _contract_checks(context: dg.AssetCheckExecutionContext,
                         lakehouse: LakehouseResource) -> Iterator[dg.AssetCheckResult]:
        selected, settings = context.selected_asset_check_keys, lakehouse.settings()
        with engine_errors(settings):  # an engine lost mid-check is named, as in a table's run
            for result in run_checks(context, lambda: lakehouse.spark_session, contract, key, settings=settings,
                                     store=lakehouse.store()):
                if dg.AssetCheckKey(key, str(result.check_name)) in selected:
                    yield result

    return _contract_checks


def run_checks(
    context: dg.AssetCheckExecutionContext,
    spark: Callable[[], SparkSession],
    contract: Contract,
    key: dg.AssetKey,
    *,
    settings: LakehouseSettings,
    store: DeltaTableStore,
) -> Iterator[dg.AssetCheckResult]:
    """Evaluate ``contract`` on the table of ``key`` in the lakehouse of ``settings``: one result per check."""
    path = str(settings.table_path(*key.path))
    if not store.exists(path):
        # A table skipped for want of input has no checks to fail: no result, and the reason.
        context.log.info(f"{contract.table} has no table yet (nothing has been written to {path}): "
                         "its checks are skipped until it is materialized")
        return
    identity = store.snapshot(path).table_id
    plan = plan_changes(store, path, after_version=resume_after(context, key, contract, identity))
    context.log.info(
        f"Checking {contract.table}: versions {plan.versions}" + (f" ({plan.reason})" if plan.reason else "")
    )
    if not plan.whole_table and not plan.files:
        # No row changed since every check was last evaluated: each keeps its result.
        yield from kept_results(context, key, contract, plan.latest_version)
        return
    session, rows = spark(), rows_covered(store, plan)
    evaluation = evaluate(
        contract, read_plan(store, session, plan), rows=rows,
        judged=judged_by_writes(store, plan, rows),
        whole_table=None if plan.whole_table else lambda: read_plan(store, session, replace(plan, whole_table=True)))
    common = _common_metadata(plan, identity)
    yield _structure_result(key, evaluation, common)
    for result in evaluation.results.values():
        yield _rule_result(key, result, evaluation, common)
    yield schema_drift_result(context, key, store, path, plan.latest_version, identity)


def kept_results(context: dg.AssetCheckExecutionContext, key: dg.AssetKey, contract: Contract,
                 version: int) -> Iterator[dg.AssetCheckResult]:
    """Each check's last result again, for a table whose rows have not changed up to ``version``
    (none passes on zero rows); ``delta_version`` moves on, so the next evaluation starts here."""
    for name in check_names(contract):
        last = last_evaluation(context, dg.AssetCheckKey(key, name))
        if last is None:  # only a check never evaluated; resume_after then planned the whole table
            continue
        seen = plain_metadata(last.metadata).get(DELTA_VERSION)
        metadata = {**last.metadata, DELTA_VERSION: dg.MetadataValue.int(version),
                    UNCHANGED_SINCE_VERSION: dg.MetadataValue.int(seen if isinstance(seen, int) else version)}
        kept = f"No row changed since version {seen}: the last result stands. {last.description or ''}"
        yield dg.AssetCheckResult(asset_key=key, check_name=name, passed=last.passed, severity=last.severity,
                                  metadata=metadata, description=kept.strip())


def resume_after(
    context: dg.AssetCheckExecutionContext, key: dg.AssetKey, contract: Contract, identity: str
) -> int | None:
    """The version after which rows must be checked, or None for the whole table.

    For each of the contract's checks, the last completed evaluation in an earlier run is
    read from the instance's event log
    (``instance.event_log_storage.get_asset_check_execution_history``; the latest record is
    this run's own planned execution). A check that passed, or failed only as a warning,
    resumes after the version it checked (``delta_version``); one that failed as an ERROR
    resumes where it started (``checked_after_version``), so failing rows are checked
    until they are gone. The earliest over all checks wins; a check never evaluated, or
    evaluated on another incarnation of the table (``delta_table_id``), means the whole
    table.
    """
    starts = []
    for name in check_names(contract)[:-1]:  # schema drift compares schemas, not rows
        evaluation = last_evaluation(context, dg.AssetCheckKey(key, name))
        if evaluation is None:
            return None
        metadata = plain_metadata(evaluation.metadata)
        version = metadata.get(DELTA_VERSION)
        start = metadata.get(CHECKED_AFTER_VERSION)
        if metadata.get(DELTA_TABLE_ID) != identity or not isinstance(version, int) or not isinstance(start, int):
            return None
        failed_hard = not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
        starts.append(start if failed_hard else version)
    earliest = min(starts)
    return None if earliest < 0 else earliest


def _common_metadata(plan: ChangePlan, identity: str) -> dict[str, Any]:
    return {
        DELTA_VERSION: dg.MetadataValue.int(plan.latest_version),
        VERSIONS_CHECKED: dg.MetadataValue.text(plan.versions),
        CHECKED_AFTER_VERSION: dg.MetadataValue.int(
            -1 if plan.whole_table or plan.after_version is None else plan.after_version
        ),
        DELTA_TABLE_ID: dg.MetadataValue.text(identity),
    }


def _structure_result(key: dg.AssetKey, evaluation: Evaluation, common: Mapping[str, Any]) -> dg.AssetCheckResult:
    errors = evaluation.structure_errors
    metadata = {
        **common,
        "structure_errors": dg.MetadataValue.int(len(errors)),
        "errors": dg.MetadataValue.md(_errors_markdown(errors)),
    }
    description = (
        "Columns and types match the model"
        if not errors
        else f"{evaluation.table} does not match its model: " + "; ".join(e.error for e in errors[:5])
    )
    return dg.AssetCheckResult(
        asset_key=key, check_name=STRUCTURE_CHECK, passed=not errors,
        severity=dg.AssetCheckSeverity.ERROR, metadata=metadata, description=description,
    )


def _rule_result(
    key: dg.AssetKey, result: RuleResult, evaluation: Evaluation, common: Mapping[str, Any]
) -> dg.AssetCheckResult:
    metadata = {
        **common,
        ROWS_CHECKED: dg.MetadataValue.int(result.rows_checked),
        FAILING_ROWS: dg.MetadataValue.int(result.failing_rows),
        FAILING_SAMPLE: dg.MetadataValue.md(result.sample_markdown() or "no failing rows"),
        COUNTED_BY: dg.MetadataValue.text("scan" if result.judged_rows is None else "write"),
    }
    if result.duplicate_keys is not None:
        metadata["duplicate_keys"] = dg.MetadataValue.int(result.duplicate_keys)
    counted = ""
    if result.judged_rows is not None:
        metadata[WRITE_ROWS] = dg.MetadataValue.int(result.judged_rows)
        metadata[WRITE_FAILING_ROWS] = dg.MetadataValue.int(result.judged_failing or 0)
        dropped = (result.judged_failing or 0) - result.failing_rows
        counted = " (counted by the write" + (f", which kept {dropped} more failing rows out of the table)"
                                              if dropped else ")")
    if result.missing_columns:
        description = (
            f"Not evaluated: {evaluation.table} has no column {', '.join(result.missing_columns)}. "
            f"See the {STRUCTURE_CHECK} check."
        )
    elif result.failing_rows:
        description = f"{result.failing_rows} of {result.rows_checked} rows fail: {result.description}{counted}"
    else:
        description = f"All {result.rows_checked} rows pass: {result.description}{counted}"
    return dg.AssetCheckResult(
        asset_key=key, check_name=result.name, passed=result.passed,
        severity=_severity(result.severity), metadata=metadata, description=description,
    )


def _errors_markdown(errors: Sequence[StructureError]) -> str:
    if not errors:
        return "no structure errors"
    return markdown_table(["column", "check", "error"], [(e.column or "(table)", e.check, e.error) for e in errors])


def _severity(severity: Severity) -> dg.AssetCheckSeverity:
    return dg.AssetCheckSeverity.WARN if severity is Severity.WARN else dg.AssetCheckSeverity.ERROR

