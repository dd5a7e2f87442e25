"""Data-time freshness through Dagster runs, real Spark and real tables: gold is fresh when it
holds every landed file, goes stale when a file landed more than the allowed lag ago has not
reached it (however recently gold ran), the sensor reports the check exactly when the verdict
changes, and the next run brings it back."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_assets.quality.freshness import (
    DEFAULT_MAX_LAG,
    FRESHNESS_CHECK,
    DataLag,
    FreshnessPath,
    data_lag,
    freshness_check,
)
from lakehouse_assets.sensors.freshness import freshness_sensor
from lakehouse_assets.simulator import land
from lakehouse_assets_tests.assets.pipeline import TO_SILVER, current_resources, materialize

LANDING = dict(records_per_file=100, bad_rate=0.0, seed=3, files_per_year=365)
DAILY = FreshnessPath("gold.daily_patient_avg", ("silver.recordings_enriched", "bronze.recordings"), "recordings")
DEVICES = FreshnessPath("gold.device_counts", ("bronze.recordings",), "recordings")


def lag_of(store, settings, path: FreshnessPath) -> DataLag:
    return data_lag(settings, store, path)


def check_result(path: FreshnessPath, instance: dg.DagsterInstance | None = None) -> dg.AssetCheckResult:
    """The check of ``path``, run in ``instance``: a table's reading counts once Dagster
    recorded its run's materialization there (a run that died between its commits recorded none)."""
    with dg.build_op_context(resources=current_resources(), instance=instance) as context:
        result = freshness_check(path).op.compute_fn.decorated_fn(context)  # type: ignore[union-attr]
    assert isinstance(result, dg.AssetCheckResult)
    return result


@pytest.mark.slow
def test_gold_goes_stale_when_landed_records_do_not_reach_it_and_fresh_again(store, built):
    # The reference lakehouse's first run: Materialize all over two landed files.
    settings, run = built.settings, built.seeds_run.result
    # The instance that recorded the runs, as the deployment's checks and sensors run in its own.
    instance = built.seeds_run.instance

    # Every landed file is in both gold tables: fresh, with a check evaluated by the run.
    for path in (DAILY, DEVICES):
        lag = lag_of(store, settings, path)
        assert lag.pending == () and lag.lag == dt.timedelta(0) and lag.landed_files == 2
        assert check_result(path, instance).passed
    evaluated = {(e.asset_key.to_user_string(), e.check_name): e.passed
                 for e in run.get_asset_check_evaluations() if e.check_name == FRESHNESS_CHECK}
    # Every table streaming from landed files has the check, not gold alone.
    assert evaluated == {(table, FRESHNESS_CHECK): True for table in (
        "bronze/recordings", "silver/recordings_enriched", "gold/daily_patient_avg", "gold/device_counts",
        "gold/heartrate_5min")}

    # A file that landed ten minutes ago reaches bronze and silver, not gold.
    late = built.land_recordings(files=1)
    [late_file] = late.paths
    ten_minutes_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)).timestamp()
    os.utime(late_file, (ten_minutes_ago, ten_minutes_ago))
    materialize(TO_SILVER, instance=instance)

    lag = lag_of(store, settings, DAILY)
    assert [os.path.basename(p) for p in lag.pending] == [late_file.name]
    assert lag.lag >= dt.timedelta(minutes=10) > DEFAULT_MAX_LAG
    stale = check_result(DAILY, instance)
    assert not stale.passed and stale.metadata["pending_files"].value == 1
    assert not check_result(DEVICES, instance).passed
    # The sensor reports both checks' results once, when they turn stale, itself: no run that
    # would queue in front of the materializations; nothing again while they stay stale.
    sensor = freshness_sensor([DAILY, DEVICES], DEFAULT_MAX_LAG)
    with dg.build_sensor_context(cursor=json.dumps({DAILY.table: True, DEVICES.table: True}),
                                 resources=current_resources(), instance=instance) as context:
        reported = sensor.evaluate_tick(context)
        assert not reported.run_requests
        assert {(e.asset_key.to_user_string(), e.check_name, e.passed, e.metadata["pending_files"].value)
                for e in reported.asset_events} == {("gold/daily_patient_avg", FRESHNESS_CHECK, False, 1),
                                                    ("gold/device_counts", FRESHNESS_CHECK, False, 1)}
        context.update_cursor(reported.cursor)
        again = sensor.evaluate_tick(context)
        assert not again.asset_events and again.skip_message == "No table's freshness changed"

    # Gold catches up: fresh again, though the file is still ten minutes old.
    materialize(["gold/daily_patient_avg", "gold/device_counts"], instance=instance)
    for path in (DAILY, DEVICES):
        assert lag_of(store, settings, path).pending == ()
        assert check_result(path, instance).passed


def test_a_table_never_built_is_as_stale_as_its_oldest_landed_file(store, settings):
    landing = Path(settings.root) / "landing"
    landed = land(landing, files=1, **LANDING)
    an_hour_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).timestamp()
    for path in landed.paths:
        os.utime(path, (an_hour_ago, an_hour_ago))

    lag = lag_of(store, settings, DAILY)

    assert len(lag.pending) == 1 and lag.lag >= dt.timedelta(minutes=59)
    assert not check_result(DAILY).passed
    # Nothing landed: nothing to be behind.
    empty = lag_of(store, settings, FreshnessPath("gold.x", ("bronze.y",), "nothing_here"))
    assert empty.landed_files == 0 and empty.lag == dt.timedelta(0)
