"""Failing-row counts and samples per rule, compared with a plain-Python oracle."""

from __future__ import annotations

import datetime as dt

from lakehouse_assets.quality import gold, silver
from lakehouse_assets.quality.evaluation import Judged, evaluate, markdown_table
from lakehouse_assets.quality.expectations import ExpectationCounts
from lakehouse_assets_tests.conftest import spark_jobs
from lakehouse_assets_tests.quality.data import GOLD_AVG_SCHEMA, SILVER_SCHEMA, UTC, silver_row


def failing(evaluation) -> dict[str, int]:
    return {name: result.failing_rows for name, result in evaluation.results.items()}


def _silver_rows():
    good = [silver_row(device_id=i % 5, heartrate=60.0 + i) for i in range(30)]
    no_name = [silver_row(name=None, heartrate=70.0 + i) for i in range(12)]
    zero = [silver_row(heartrate=0.0), silver_row(heartrate=-3.0), silver_row(heartrate=None)]
    no_device = [silver_row(device_id=None)]
    return good + no_name + zero + no_device


def test_counts_every_rules_failures_and_samples_at_most_ten(spark):
    rows = _silver_rows()
    df = spark.createDataFrame(rows, SILVER_SCHEMA)

    result = evaluate(silver.RECORDINGS_ENRICHED, df)

    assert {r.rows_checked for r in result.results.values()} == {len(rows)}
    expected = {
        "known_patient": sum(1 for r in rows if r[2] is None),
        "heartrate_positive": sum(1 for r in rows if r[4] is None or r[4] <= 0),
        "heartrate_in_range": sum(1 for r in rows if r[4] is None or r[4] > 300),
        "device_id_present": sum(1 for r in rows if r[0] is None),
        "mrn_positive": 0,
        "time_plausible": 0,
    }
    assert failing(result) == expected
    names = result.results["known_patient"]
    assert len(names.sample) == 10 < names.failing_rows
    assert all(row[2] is None for row in names.sample)  # only failing rows are sampled
    assert len(result.results["heartrate_positive"].sample) == expected["heartrate_positive"]
    assert result.results["mrn_positive"].sample == ()
    assert result.results["device_id_present"].severity.value == "WARN"
    assert not result.structure_errors


def test_sample_is_a_markdown_table_of_the_failing_rows(spark):
    df = spark.createDataFrame([silver_row(), silver_row(mrn=-7, name="Pipe | Name")], SILVER_SCHEMA)

    markdown = evaluate(silver.RECORDINGS_ENRICHED, df).results["mrn_positive"].sample_markdown()

    lines = markdown.splitlines()
    assert lines[0] == "| device_id | mrn | name | time | heartrate | _source_file | _source_line |"
    assert len(lines) == 3 and "| -7 |" in lines[2] and "Pipe \\| Name" in lines[2]


def test_unique_keys_count_the_rows_that_share_a_key(spark):
    day = dt.datetime(2020, 3, 1, tzinfo=UTC)
    rows = [(1, "A", 70.0, day), (1, "A2", 71.0, day), (1, "A3", 72.0, day),
            (2, "B", 70.0, day), (2, "B", 70.0, day), (3, "C", 70.0, day)]
    df = spark.createDataFrame(rows, GOLD_AVG_SCHEMA)

    unique = evaluate(gold.DAILY_PATIENT_AVG, df).results["one_row_per_patient_day"]

    assert (unique.failing_rows, unique.duplicate_keys, unique.rows_checked) == (5, 2, 6)
    assert unique.sample[0][0] == 1 and unique.sample[0][-1] == 3  # the most repeated key first


def test_a_rule_on_a_missing_column_fails_without_running(spark):
    df = spark.createDataFrame([silver_row()], SILVER_SCHEMA).drop("heartrate")

    result = evaluate(silver.RECORDINGS_ENRICHED, df)

    assert result.results["heartrate_positive"].missing_columns == ("heartrate",)
    assert not result.results["heartrate_positive"].passed
    assert result.results["known_patient"].passed
    assert result.structure_errors


def test_empty_data_passes_every_rule(spark):
    result = evaluate(silver.RECORDINGS_ENRICHED, spark.createDataFrame([], SILVER_SCHEMA))

    assert all(r.passed and r.rows_checked == 0 for r in result.results.values())


def test_markdown_cells_are_cut_short():
    table = markdown_table(["a"], [["x" * 200], [None]])
    assert table.splitlines()[2].endswith("… |") and table.splitlines()[3] == "| null |"


def test_rules_the_writes_counted_are_reported_from_their_counts_without_reading_a_row(spark):
    rows = spark.createDataFrame([silver_row(), silver_row(device_id=None)], SILVER_SCHEMA)
    names = [r.name for r in silver.RECORDINGS_ENRICHED.rules]
    # The writes read 5 rows and wrote 2: 3 failed known_patient and were dropped; of the 2
    # rows without a device (WARN), one was written.
    failed = {**dict.fromkeys(names, 0), "known_patient": 3, "device_id_present": 2}
    kept = {**dict.fromkeys(names, 0), "device_id_present": 1}
    passing = Judged(2, ExpectationCounts(5, failed, {**kept, "device_id_present": 0}))

    with spark_jobs(spark) as jobs:
        clean = evaluate(silver.RECORDINGS_ENRICHED, rows, judged=passing)
    warned = evaluate(silver.RECORDINGS_ENRICHED, rows, judged=Judged(2, ExpectationCounts(5, failed, kept)))

    assert jobs == []  # nothing failed in the table: no row read
    assert all(r.passed and r.rows_checked == 2 and r.judged_rows == 5 for r in clean.results.values())
    assert clean.results["known_patient"].judged_failing == 3
    assert failing(warned) == kept
    # A rule that failed is sampled from the rows written.
    assert [row[0] for row in warned.results["device_id_present"].sample] == [None]


def test_rules_the_writes_did_not_count_are_counted_on_the_rows(spark):
    rows = spark.createDataFrame([silver_row(), silver_row(mrn=-1)], SILVER_SCHEMA)
    only = Judged(2, ExpectationCounts(2, {"known_patient": 0}, {"known_patient": 0}))

    result = evaluate(silver.RECORDINGS_ENRICHED, rows, judged=only)

    assert result.results["known_patient"].judged_rows == 2
    assert result.results["mrn_positive"].judged_rows is None and failing(result)["mrn_positive"] == 1
