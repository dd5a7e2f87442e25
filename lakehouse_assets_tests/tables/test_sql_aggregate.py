"""A grouped streaming table's SQL: the columns its changed groups are merged by, or the reason
it stays in complete mode."""

from __future__ import annotations

import dagster as dg
import pytest

from lakehouse_assets.assets.gold import daily_patient_avg, device_counts
from lakehouse_assets.assets.sql_asset import sql_asset
from lakehouse_assets.spec import TableSpec
from lakehouse_assets.tables.sql_aggregate import NotKeyed, group_keys


def test_the_seeds_gold_tables_are_merged_by_the_columns_they_group_by() -> None:
    daily = TableSpec.of(daily_patient_avg.metadata_by_key[dg.AssetKey(["gold", "daily_patient_avg"])])
    assert daily is not None and (daily.output_mode, daily.keys) == ("update", ("mrn", "name", "date"))
    assert daily.recomputed_by is not None and "STREAM" not in daily.recomputed_by
    counts = TableSpec.of(device_counts.metadata_by_key[dg.AssetKey(["gold", "device_counts"])])
    assert counts is not None and (counts.output_mode, counts.keys) == ("update", ("device_id",))


def test_the_keys_are_the_selected_grouped_columns_with_their_expressions() -> None:
    assert group_keys("SELECT mrn, MEAN(heartrate) AS avg_heartrate, DATE_TRUNC('DD', time) AS date "
                      "FROM STREAM(silver.r) GROUP BY mrn, DATE_TRUNC('DD', time)") == (
        ("mrn", "mrn"), ("date", "DATE_TRUNC('DD', time)"))
    # Grouped by the alias; any aggregate, a join and a filter are Spark's to run.
    assert group_keys("SELECT u.region AS r, COUNT(DISTINCT b) AS n, SUM(x) / COUNT(x) AS m FROM STREAM(s.t) t "
                      "JOIN s.u u ON t.a = u.a WHERE x > 0 GROUP BY r") == (("r", "u.region"),)


@pytest.mark.parametrize("query, reason", [
    ("SELECT a, SUM(x) AS s FROM STREAM(s.t) GROUP BY a HAVING SUM(x) > 1", "uses HAVING"),
    ("SELECT a, SUM(x) AS s FROM STREAM(s.t) GROUP BY a ORDER BY s", "uses ORDER"),
    ("SELECT a, SUM(x) AS s FROM STREAM(s.t) GROUP BY a WITH ROLLUP", "uses ROLLUP"),
    ("SELECT SUM(x) AS s FROM STREAM(s.t) GROUP BY a", "does not select"),
    ("SELECT a FROM STREAM(s.t)", "not one SELECT ... GROUP BY"),
])
def test_what_cannot_be_merged_by_key_says_why(query: str, reason: str) -> None:
    with pytest.raises(NotKeyed, match=reason):
        group_keys(query)


def test_a_grouped_table_that_cannot_be_merged_by_key_stays_in_complete_mode_saying_why(tmp_path) -> None:
    path = tmp_path / "top.sql"
    path.write_text("CREATE OR REFRESH STREAMING TABLE gold.top AS SELECT a, SUM(x) AS s "
                    "FROM STREAM(silver.t) GROUP BY a HAVING SUM(x) > 1")
    asset = sql_asset(path)
    spec = TableSpec.of(asset.metadata_by_key[asset.key])
    assert spec is not None and (spec.output_mode, spec.keys, spec.recomputed_by) == ("complete", (), None)
    assert asset.metadata_by_key[asset.key]["incremental"] == "No, rewritten whole: it uses HAVING"
