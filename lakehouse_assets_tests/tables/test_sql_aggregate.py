"""A grouped streaming table's SQL read as an incremental aggregate, or refused with the reason
it stays in complete mode."""

from __future__ import annotations

import dagster as dg
import pytest

from lakehouse_assets.aggregates import IncrementalAggregate, Measure
from lakehouse_assets.assets.gold import daily_patient_avg, device_counts
from lakehouse_assets.spec import TableSpec
from lakehouse_assets.tables.sql_aggregate import NotIncremental, incremental_aggregate


def test_the_seeds_gold_tables_are_kept_incrementally() -> None:
    daily = TableSpec.of(daily_patient_avg.metadata_by_key[dg.AssetKey(["gold", "daily_patient_avg"])])
    assert daily is not None and daily.output_mode == "update"
    assert daily.aggregate == IncrementalAggregate(
        keys=(("mrn", "mrn"), ("name", "name"), ("date", "DATE_TRUNC('DD', time)")),
        measures=(Measure("avg_heartrate", "mean", "heartrate"),),
        columns=("mrn", "name", "avg_heartrate", "date"))
    counts = TableSpec.of(device_counts.metadata_by_key[dg.AssetKey(["gold", "device_counts"])])
    assert counts is not None and counts.aggregate is not None and counts.aggregate.measures == (
        Measure("total_recordings", "count", "device_id"),)


def test_the_source_rows_keep_the_filter_and_lose_the_grouping() -> None:
    source, aggregate = incremental_aggregate(
        "SELECT region, COUNT(*) AS n, MAX(amount * 2) AS top FROM STREAM(silver.sales) "
        "WHERE amount > 0 GROUP BY region")
    assert source == "SELECT * FROM STREAM(silver.sales) WHERE amount > 0"
    assert aggregate.measures == (Measure("n", "count", "*"), Measure("top", "max", "amount * 2"))


@pytest.mark.parametrize("query, reason", [
    ("SELECT a, COUNT(DISTINCT b) AS n FROM STREAM(s.t) GROUP BY a", "counts distinct values"),
    ("SELECT a, SUM(x) FROM STREAM(s.t) GROUP BY a", "has no name"),
    ("SELECT a, SUM(x) AS s FROM STREAM(s.t) GROUP BY a HAVING SUM(x) > 1", "uses HAVING"),
    ("SELECT t.a, SUM(x) AS s FROM STREAM(s.t) t JOIN s.u u ON t.a = u.a GROUP BY t.a", "uses JOINS"),
    ("SELECT a, SUM(x) / COUNT(x) AS m FROM STREAM(s.t) GROUP BY a", "computes with an aggregate"),
    ("SELECT SUM(x) AS s FROM STREAM(s.t) GROUP BY a", "does not select"),
    ("SELECT a, b, SUM(x) AS s FROM STREAM(s.t) GROUP BY a", "b is neither grouped by nor an aggregate"),
])
def test_what_cannot_be_kept_incrementally_says_why(query: str, reason: str) -> None:
    with pytest.raises(NotIncremental, match=reason):
        incremental_aggregate(query)
