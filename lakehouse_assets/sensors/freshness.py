"""The freshness sensor: between runs, reports a table's ``data_freshness`` result itself (an
evaluation without a run, so no run queues before the ones that would make it fresh) when the
table crosses its allowed lag either way. Logs and the landing folder only, no Spark; its cursor
holds the last verdicts.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

import dagster as dg

from lakehouse_assets.quality.freshness import FRESHNESS_CHECK, FreshnessPath, data_lag, freshness_result


def freshness_sensor(paths: Sequence[FreshnessPath], max_lag: dt.timedelta, *,
                     minimum_interval_seconds: int = 60) -> dg.SensorDefinition:
    """A sensor over the ``data_freshness`` checks of ``paths``' tables."""

    @dg.sensor(name="lakehouse_freshness_sensor", minimum_interval_seconds=minimum_interval_seconds,
               default_status=dg.DefaultSensorStatus.RUNNING, required_resource_keys={"lakehouse"},
               description="Reports the data_freshness checks' new results when a table goes stale or fresh")
    def lakehouse_freshness_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        settings, store = context.resources.lakehouse.settings(), context.resources.lakehouse.store()
        lags = {p.table: data_lag(settings, store, p, context.instance) for p in paths}
        previous = json.loads(context.cursor) if context.cursor else {}
        fresh = {table: lag.lag <= max_lag for table, lag in lags.items()}
        context.update_cursor(json.dumps(fresh, sort_keys=True))
        # A table not seen before counts as having been fresh (its runs evaluate its check anyway),
        # so a first look at a quiet lakehouse reports nothing.
        changed = [table for table, now in fresh.items() if previous.get(table, True) != now]
        if not changed:
            return dg.SkipReason("No table's freshness changed")
        results = {table: freshness_result(lags[table], max_lag) for table in changed}
        return dg.SensorResult(asset_events=[
            dg.AssetCheckEvaluation(asset_key=dg.AssetKey(table.split(".")), check_name=FRESHNESS_CHECK,
                                    passed=r.passed, metadata=r.metadata, severity=r.severity,
                                    description=r.description)
            for table, r in results.items()])

    return lakehouse_freshness_sensor
