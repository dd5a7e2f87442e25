"""Expectations on a batch, with the shared SparkSession: counts per rule in one pass, a FAIL
rule stopping the batch with its name, the table and a failing row, and counts that travel in
a Delta commit and add up across a run's commits."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from lakehouse_assets.errors import ExpectationFailedError, LakehouseError
from lakehouse_assets.quality.expectations import (
    EXPECTATIONS_KEY,
    ExpectationCounts,
    ExpectationsSink,
    commit_metadata,
    counts_of_commits,
    enforce,
)
from lakehouse_assets.quality.quarantine import QUARANTINE_REASON, dropped_by, route, split_routed
from lakehouse_assets.quality.rules import Severity, greater_than, not_null, sql_rule
from lakehouse_assets.storage import DeltaSink

SCHEMA = "id BIGINT, heartrate DOUBLE, name STRING"
ROWS = [(1, 70.0, "ann"), (2, -1.0, "bob"), (3, 0.0, None), (4, 80.0, None)]

POSITIVE = greater_than("heartrate", 0, name="heartrate_positive", severity=Severity.ERROR)
NAMED = not_null("name", name="named", severity=Severity.WARN)
SMALL_ID = sql_rule("small_id", "id < 4", columns=["id"], severity=Severity.FAIL)


def test_every_rule_is_counted_and_a_passing_fail_rule_lets_the_batch_through(spark):
    df = spark.createDataFrame(ROWS[:3], SCHEMA)

    counts = enforce(df, [POSITIVE, NAMED, SMALL_ID], "silver.readings")

    failed = {"heartrate_positive": 2, "named": 1, "small_id": 0}
    assert counts == ExpectationCounts(3, failed, kept=failed)  # nothing routed: every row is written
    assert counts.passed("heartrate_positive") == 1


def test_a_failing_fail_rule_names_itself_the_table_and_a_failing_row(spark):
    df = spark.createDataFrame(ROWS, SCHEMA)

    with pytest.raises(ExpectationFailedError) as failed:
        enforce(df, [NAMED, SMALL_ID], "silver.readings")

    message = str(failed.value)
    assert "small_id" in message and "silver.readings" in message and '"id": 4' in message, message
    assert "1 row(s)" in message and "\n" not in message  # one line: it must survive a query's traceback


def test_routed_rows_count_a_drop_rule_by_the_reason_they_were_routed_by(spark):
    routed = route(spark.createDataFrame(ROWS, SCHEMA), [POSITIVE, NAMED])

    counts = enforce(routed, [POSITIVE, NAMED], "silver.readings", dropped_by=dropped_by())

    assert counts.failed == {"heartrate_positive": 2, "named": 2}
    # Of the failing rows, those written: none dropped by an ERROR rule; one of the two
    # unnamed rows (the other was dropped for its heart rate).
    assert counts.kept == {"heartrate_positive": 0, "named": 1}


def test_a_condition_that_is_null_for_a_row_fails_the_row(spark):
    """Only TRUE passes (SQL's three-valued logic, as a WHERE clause keeps rows): a condition
    NULL for a row drops it to the quarantine (ERROR), counts it (WARN), stops the batch (FAIL)."""
    df = spark.createDataFrame([(1, 70.0, "ann"), (2, None, None)], SCHEMA)
    above_zero, known, set_ = "heartrate > 0", "name IN ('ann', 'bob')", "heartrate >= 0"
    null_for_row_2 = df.where("id = 2").select(*(F.expr(c).isNull() for c in (above_zero, known, set_))).first()
    assert null_for_row_2 is not None and all(null_for_row_2), "each condition is NULL, not FALSE, for row 2"
    drop = sql_rule("heartrate_above_zero", above_zero, columns=["heartrate"], severity=Severity.ERROR)
    warn = sql_rule("name_known", known, columns=["name"], severity=Severity.WARN)
    stop = sql_rule("heartrate_set", set_, columns=["heartrate"], severity=Severity.FAIL)

    routed = route(df, [drop, warn])
    passed, quarantined = split_routed(routed, passed_columns=["id"], quarantine_columns=["id"])

    assert [row.id for row in passed.collect()] == [1]
    assert [(row.id, row[QUARANTINE_REASON]) for row in quarantined.collect()] == [(2, "heartrate_above_zero")]
    assert enforce(routed, [drop, warn], "silver.readings", dropped_by=dropped_by()).failed == {
        "heartrate_above_zero": 1, "name_known": 1}
    with pytest.raises(ExpectationFailedError, match="heartrate_set"):
        enforce(df, [stop], "silver.readings")


def test_a_rule_reading_a_column_the_rows_lack_is_named(spark):
    with pytest.raises(LakehouseError, match="small_id of silver.readings reads \\['id'\\]"):
        enforce(spark.createDataFrame([(1.0,)], "heartrate DOUBLE"), [SMALL_ID], "silver.readings")


def test_counts_travel_in_commit_metadata_and_add_up_over_a_run(spark, store, tmp_path):
    first, second = ExpectationCounts(3, {"a": 1}), ExpectationCounts(2, {"a": 2, "b": 1})
    path = str(tmp_path / "t")
    store.write(spark.range(0, 2), path, metadata=commit_metadata(first))
    store.write(spark.range(2, 3), path)  # a commit counting nothing
    store.write(spark.range(3, 4), path, metadata=commit_metadata(second))

    # Read back from the table's log, as a run's report reads its commits.
    total = counts_of_commits(store.history(path))

    assert total == ExpectationCounts(5, {"a": 3, "b": 1})
    assert ExpectationCounts.from_json(commit_metadata(total)[EXPECTATIONS_KEY]) == total
    # The failing rows written add up too, when every counting commit recorded them.
    kept = ExpectationCounts(1, {"a": 1}, {"a": 0})
    assert first + kept == ExpectationCounts(4, {"a": 2})  # the first did not: unknown
    assert kept + kept == ExpectationCounts(2, {"a": 2}, {"a": 0})
    assert ExpectationCounts.from_json(kept.to_json()) == kept


def test_an_expectations_sink_refuses_a_rule_that_drops_rows(store, tmp_path):
    with pytest.raises(ValueError, match="heartrate_positive"):
        ExpectationsSink(DeltaSink(store, str(tmp_path / "t")), [POSITIVE], "silver.t")
