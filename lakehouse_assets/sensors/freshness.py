"""The freshness sensor: evaluates a table's ``data_freshness`` check when its verdict changes
between runs.

A table that stops being materialized while files keep landing goes stale with no run to
notice; this sensor looks (logs and the landing folder only, no Spark) and, when a table
crosses its allowed lag either way, reports the check's new result itself, as an evaluation
without a run: no run waits in the queue in front of the materializations that would make
the table fresh again. A verdict that has not changed reports nothing. Its cursor holds the
last verdicts.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dagster as dg

from lakehouse_assets.quality.freshness import FRESHNESS_CHECK, DataLag, FreshnessPath, data_lag, freshness_result

FRESHNESS_SENSOR_NAME = "lakehouse_freshness_sensor"


@dataclass(frozen=True)
class FreshnessScan:
    """One look: each table's verdict (fresh or not), and the tables whose verdict changed."""

    fresh: Mapping[str, bool]
    changed: list[str]


def scan_freshness(previous: Mapping[str, bool], lags: Mapping[str, DataLag], max_lag: dt.timedelta) -> FreshnessScan:
    """Compare each table's verdict now (from ``lags``) with ``previous``. A table not seen
    before counts as having been fresh (its runs evaluate its check anyway), so a first look
    at a quiet lakehouse launches nothing."""
    fresh = {table: lag.lag <= max_lag for table, lag in lags.items()}
    return FreshnessScan(fresh, [table for table, now in fresh.items() if previous.get(table, True) != now])


def freshness_sensor(paths: Sequence[FreshnessPath], max_lag: dt.timedelta, *,
                     minimum_interval_seconds: int = 60) -> dg.SensorDefinition:
    """A sensor over the ``data_freshness`` checks of ``paths``' tables."""
    checks = {p.table: dg.AssetCheckKey(dg.AssetKey(p.table.split(".")), FRESHNESS_CHECK) for p in paths}

    @dg.sensor(name=FRESHNESS_SENSOR_NAME, minimum_interval_seconds=minimum_interval_seconds,
               default_status=dg.DefaultSensorStatus.RUNNING, required_resource_keys={"lakehouse"},
               description="Reports the data_freshness checks' new results when a table goes stale or fresh")
    def lakehouse_freshness_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        settings, store = context.resources.lakehouse.settings(), context.resources.lakehouse.store()
        lags = {p.table: data_lag(settings, store, p, context.instance) for p in paths}
        scan = scan_freshness(json.loads(context.cursor) if context.cursor else {}, lags, max_lag)
        context.update_cursor(json.dumps(scan.fresh, sort_keys=True))
        if not scan.changed:
            return dg.SkipReason("No table's freshness changed")
        return dg.SensorResult(asset_events=[freshness_evaluation(checks[t], lags[t], max_lag) for t in scan.changed])

    return lakehouse_freshness_sensor


def freshness_evaluation(check: dg.AssetCheckKey, lag: DataLag, max_lag: dt.timedelta) -> dg.AssetCheckEvaluation:
    """The ``data_freshness`` result for ``lag``, as an evaluation reported without a run."""
    result = freshness_result(lag, max_lag)
    return dg.AssetCheckEvaluation(asset_key=check.asset_key, check_name=check.name, passed=result.passed,
                                   metadata=result.metadata, severity=result.severity,
                                   description=result.description)
