"""Asset checks from contracts, run the way Dagster runs them: materialize a tiny asset that
writes a Delta table, then its checks, and read the results' metadata."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import pytest

from lakehouse_assets.quality import bronze, gold, silver
from lakehouse_assets.quality.checks import (
    SCHEMA_DRIFT_CHECK,
    STRUCTURE_CHECK,
    check_names,
    contract_checks,
)
from lakehouse_assets.quality.expectations import counts_of_commits
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.simulator import land
from lakehouse_assets.storage import run_commits
from lakehouse_assets_tests.assets.pipeline import current_resources, materialize, tables
from lakehouse_assets_tests.conftest import spark_jobs
from lakehouse_assets_tests.quality.data import (
    BRONZE_SCHEMA,
    GOLD_AVG_SCHEMA,
    SILVER_SCHEMA,
    UTC,
    bronze_row,
    silver_row,
)

SILVER_KEY = dg.AssetKey(["silver", "recordings_enriched"])


@dataclass
class Batch:
    """What the next materialization of a test table writes."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    schema: str = SILVER_SCHEMA
    mode: str = "append"


def table_writer(key: dg.AssetKey, batch: Batch) -> dg.AssetsDefinition:
    """An asset that writes ``batch`` to the table of ``key`` (empty rows: writes nothing)."""

    @dg.asset(key=key)
    def _table(lakehouse: LakehouseResource) -> None:
        if not batch.rows:
            return
        path = lakehouse.settings().table_path(*key.path)
        df = lakehouse.spark_session.createDataFrame(batch.rows, batch.schema)
        lakehouse.store().write(df, str(path), mode=batch.mode, overwrite_schema=batch.mode == "overwrite")

    return _table


def run(assets: list, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    return dg.materialize(assets, instance=instance, resources=current_resources(), raise_on_error=False)


def results(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def meta(evaluation: dg.AssetCheckEvaluation, name: str) -> Any:
    return getattr(evaluation.metadata[name], "value", evaluation.metadata[name])


@pytest.fixture
def instance() -> dg.DagsterInstance:
    with dg.instance_for_test() as test_instance:
        yield test_instance


def test_checks_pass_on_good_rows_and_count_the_bad_ones(spark, settings, instance):
    good = [silver_row(device_id=i, heartrate=60.0 + i) for i in range(20)]
    bad = [silver_row(name=None)] * 12 + [silver_row(heartrate=0.0), silver_row(heartrate=350.0), silver_row(device_id=None)]
    batch = Batch(rows=good + bad)

    outcome = results(run([table_writer(SILVER_KEY, batch), contract_checks(silver.RECORDINGS_ENRICHED)], instance))

    assert set(outcome) == set(check_names(silver.RECORDINGS_ENRICHED))
    expected_failures = {"known_patient": 12, "heartrate_positive": 1, "heartrate_in_range": 1, "device_id_present": 1,
                         "mrn_positive": 0, "time_plausible": 0}
    for name, failing in expected_failures.items():
        assert meta(outcome[name], "failing_rows") == failing, name
        assert outcome[name].passed is (failing == 0)
        assert meta(outcome[name], "rows_checked") == len(good) + len(bad)
        assert meta(outcome[name], "delta_version") == 0
    assert outcome["device_id_present"].severity == dg.AssetCheckSeverity.WARN
    assert outcome["known_patient"].severity == dg.AssetCheckSeverity.ERROR
    sample = meta(outcome["known_patient"], "failing_sample")
    assert len(sample.splitlines()) == 2 + 10  # header, rule, ten rows
    assert outcome[STRUCTURE_CHECK].passed and outcome[SCHEMA_DRIFT_CHECK].passed


def _pipeline(batch: Batch, *, blocking: bool) -> tuple[list, list[str]]:
    ran: list[str] = []

    @dg.asset(deps=[SILVER_KEY])
    def downstream() -> None:
        ran.append("downstream")

    assets = [table_writer(SILVER_KEY, batch), contract_checks(silver.RECORDINGS_ENRICHED, blocking=blocking), downstream]
    return assets, ran


@pytest.mark.parametrize(
    ("rows", "blocking", "downstream_runs"),
    [
        ([silver_row(), silver_row(mrn=-4)], True, False),  # an ERROR rule fails: blocked
        ([silver_row(), silver_row(mrn=-4)], False, True),  # same failure, checks not blocking
        ([silver_row(), silver_row(device_id=None)], True, True),  # only a WARN rule fails
    ],
    ids=["error-blocks", "non-blocking", "warn-never-blocks"],
)
def test_a_failing_blocking_check_stops_downstream_in_the_same_run(spark, settings, instance, rows, blocking, downstream_runs):
    assets, ran = _pipeline(Batch(rows=rows), blocking=blocking)

    result = run(assets, instance)

    materialized = {m.asset_key for m in result.asset_materializations_for_node("downstream")} if downstream_runs else set()
    assert (ran == ["downstream"]) is downstream_runs
    assert (dg.AssetKey("downstream") in materialized) is downstream_runs
    # Dagster fails the check step when a blocking ERROR check fails, so the run fails too.
    assert result.success is downstream_runs


@pytest.mark.parametrize(("rows", "requested"), [([silver_row()], 1), ([silver_row(), silver_row(mrn=-4)], 0)],
                         ids=["passed", "failed"])
def test_a_failing_blocking_check_keeps_later_automated_runs_from_downstream(spark, settings, instance, rows, requested):
    from lakehouse_assets.assets.automation import downstream_of_new_data

    @dg.asset(deps=[SILVER_KEY], automation_condition=downstream_of_new_data())
    def downstream() -> None: ...

    writer, checks = table_writer(SILVER_KEY, Batch(rows=rows)), contract_checks(silver.RECORDINGS_ENRICHED)
    defs = dg.Definitions(assets=[writer, downstream], asset_checks=[checks], resources=current_resources())
    before = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    run([writer, checks], instance)

    after = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=before.cursor)

    assert after.total_requested == requested


def test_checks_read_only_the_rows_added_since_the_last_check(spark, settings, instance):
    batch = Batch(rows=[silver_row(heartrate=60.0 + i) for i in range(5)])
    assets = [table_writer(SILVER_KEY, batch), contract_checks(silver.RECORDINGS_ENRICHED)]

    first = results(run(assets, instance))["heartrate_positive"]
    batch.rows = [silver_row(), silver_row(), silver_row(heartrate=-1.0)]
    second = results(run(assets, instance))["heartrate_positive"]
    batch.rows = [silver_row(), silver_row()]
    third = results(run(assets, instance))["heartrate_positive"]
    batch.rows = []
    fourth = results(run(assets, instance))  # nothing new, but the bad row is still there

    assert (meta(first, "rows_checked"), meta(first, "versions_checked")) == (5, "whole table at 0")
    assert (meta(second, "rows_checked"), meta(second, "failing_rows"), meta(second, "versions_checked")) == (3, 1, "1")
    # The ERROR failure is not forgotten: its rows are checked again with the new ones.
    assert (meta(third, "rows_checked"), meta(third, "failing_rows"), meta(third, "versions_checked")) == (5, 1, "1-2")
    assert not fourth["heartrate_positive"].passed
    # One scan serves every rule, so the rules that passed are re-read over the same range.
    assert meta(fourth["known_patient"], "rows_checked") == 5


def test_a_check_whose_table_did_not_change_keeps_its_last_result(spark, settings, instance):
    # A WARN rule fails on the first rows; a run that writes nothing does not turn it green,
    # and no rule passes on zero rows checked.
    batch = Batch(rows=[silver_row(), silver_row(), silver_row(device_id=None)])
    assets = [table_writer(SILVER_KEY, batch), contract_checks(silver.RECORDINGS_ENRICHED)]
    first = results(run(assets, instance))

    batch.rows = []
    again = results(run(assets, instance))

    assert set(again) == set(first)
    warned = again["device_id_present"]
    assert not first["device_id_present"].passed and not warned.passed
    assert warned.severity == dg.AssetCheckSeverity.WARN
    assert (meta(warned, "failing_rows"), meta(warned, "rows_checked"), meta(warned, "unchanged_since_version")) == (1, 3, 0)
    assert warned.description.startswith("No row changed since version 0: the last result stands. 1 of 3 rows fail")
    for name in ("heartrate_positive", "known_patient", "schema_drift"):
        assert again[name].passed and meta(again[name], "delta_version") == 0, name

    # New rows are checked again, from the version the kept results moved on to.
    batch.rows = [silver_row()]
    third = results(run(assets, instance))
    assert (meta(third["device_id_present"], "rows_checked"), meta(third["device_id_present"], "versions_checked")) \
        == (1, "1")
    assert third["device_id_present"].passed


def test_a_complete_mode_table_is_checked_as_it_stands(spark, settings, instance):
    key = dg.AssetKey(["gold", "daily_patient_avg"])
    day = dt.datetime(2020, 3, 1, tzinfo=UTC)
    batch = Batch(rows=[(1, "A", 70.0, day), (2, "B", 71.0, day)], schema=GOLD_AVG_SCHEMA, mode="overwrite")
    assets = [table_writer(key, batch), contract_checks(gold.DAILY_PATIENT_AVG)]

    run(assets, instance)
    batch.rows = [(1, "A", 70.0, day), (1, "A renamed", 72.0, day), (2, "B", 71.0, day)]
    second = results(run(assets, instance))

    unique = second["one_row_per_patient_day"]
    assert (meta(unique, "rows_checked"), meta(unique, "versions_checked")) == (3, "whole table at 1")
    assert (meta(unique, "failing_rows"), meta(unique, "duplicate_keys")) == (2, 1)
    assert not unique.passed and second["avg_heartrate_in_range"].passed


def test_schema_drift_warns_with_the_columns_that_changed(spark, settings, instance):
    key = dg.AssetKey(["bronze", "recordings"])
    batch = Batch(rows=[bronze_row() + (0.5,)], schema=BRONZE_SCHEMA + ", battery DOUBLE", mode="overwrite")
    assets = [table_writer(key, batch), contract_checks(bronze.RECORDINGS, blocking=False)]

    first = results(run(assets, instance))[SCHEMA_DRIFT_CHECK]
    batch.rows = [bronze_row() + ("low", "1.2")]
    batch.schema = BRONZE_SCHEMA + ", battery STRING, firmware STRING"
    second = results(run(assets, instance))

    drift = second[SCHEMA_DRIFT_CHECK]
    assert first.passed
    assert not drift.passed and drift.severity == dg.AssetCheckSeverity.WARN
    assert meta(drift, "columns_added") == "firmware"
    assert meta(drift, "columns_changed") == "battery: double -> string"
    assert meta(drift, "compared_with_version") == 0
    assert second[STRUCTURE_CHECK].passed  # bronze may grow columns


def test_a_missing_table_is_not_checked_and_the_run_says_why(spark, settings, instance):
    # A table skipped for want of input: its checks give no result, so none fails or blocks.
    result = run([table_writer(SILVER_KEY, Batch()), contract_checks(silver.RECORDINGS_ENRICHED)], instance)

    assert result.success
    assert results(result) == {}
    log = "\n".join(entry.user_message for entry in instance.all_logs(result.run_id))
    assert "silver.recordings_enriched has no table yet" in log


TO_SILVER_WITH_LOOKUP = tables("bronze/recordings", "silver/patients", "silver/recordings_enriched",
                               "silver/recordings_quarantine")
SILVER_CHECKS = dg.AssetSelection.checks(
    *[dg.AssetCheckKey(SILVER_KEY, name) for name in check_names(silver.RECORDINGS_ENRICHED)])


@pytest.mark.slow
def test_checks_of_rules_the_write_counted_read_no_row_and_report_its_commits_counts(spark, settings, store):
    # Bad records that the silver write quarantines by its ERROR rules; every row it writes
    # passes every rule of the table's contract.
    options = dict(records_per_file=200, bad_rate=0.05, seed=5, files_per_year=365,
                   bad_kinds=("non_positive_heartrate", "unknown_patient"))
    instance = dg.DagsterInstance.ephemeral()
    land(settings.root / "landing", files=2, **options)
    materialize(TO_SILVER_WITH_LOOKUP, instance=instance)
    materialize(SILVER_CHECKS, instance=instance)  # the checks' last evaluation, as after each run
    land(settings.root / "landing", files=1, **options)
    run_id = materialize(TO_SILVER_WITH_LOOKUP, instance=instance).run_id

    with spark_jobs(spark) as jobs:
        outcome = results(materialize(SILVER_CHECKS, instance=instance))

    assert jobs == []  # every rule was judged by the write: nothing is read again
    path = str(settings.table_path("silver", "recordings_enriched"))
    commits = run_commits(store, path, run_id)
    counted = counts_of_commits(commits)
    assert counted.failed["heartrate_positive"] and counted.failed["known_patient"]  # rows were dropped
    for rule in silver.RECORDINGS_ENRICHED.rules:
        result = outcome[rule.name]
        assert result.passed, rule.name
        assert meta(result, "counted_by") == "write"
        assert meta(result, "rows_checked") == sum(c.rows_written or 0 for c in commits)
        assert (meta(result, "failing_rows"), meta(result, "write_failing_rows"), meta(result, "write_rows")) == (
            counted.kept[rule.name], counted.failed[rule.name], counted.rows), rule.name
    assert outcome[STRUCTURE_CHECK].passed and outcome[SCHEMA_DRIFT_CHECK].passed

    # A write that counts nothing (here: rows appended by hand) is not judged: its rows are read.
    bad = spark.createDataFrame([silver_row(mrn=10000001, heartrate=-5.0)], SILVER_SCHEMA)
    store.write(bad, path, mode="append")
    with spark_jobs(spark) as jobs:
        again = results(materialize(SILVER_CHECKS, instance=instance, raise_on_error=False))

    assert jobs
    assert meta(again["heartrate_positive"], "counted_by") == "scan"
    assert (meta(again["heartrate_positive"], "failing_rows"), meta(again["heartrate_positive"], "rows_checked")) \
        == (1, 1)
    assert not again["heartrate_positive"].passed and again["known_patient"].passed
