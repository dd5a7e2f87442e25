"""The contracts: Pandera PySpark models for the structure, and rules for the rows; good
tables pass, bad ones are rejected with the reason."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import functions as F

from lakehouse_assets.quality import bronze, gold, silver
from lakehouse_assets.quality.evaluation import evaluate
from lakehouse_assets_tests.quality.data import (
    BRONZE_SCHEMA,
    GOLD_AVG_SCHEMA,
    SILVER_SCHEMA,
    UTC,
    bronze_row,
    silver_row,
)


def _failed_checks(contract, df) -> set[str]:
    """The rules and unique keys of ``contract`` that rows of ``df`` fail."""
    return {name for name, result in evaluate(contract, df).results.items() if not result.passed}


def test_good_silver_rows_pass_the_whole_contract(spark):
    df = spark.createDataFrame([silver_row(), silver_row(device_id=2, mrn=10000002, name="Bo Chan")], SILVER_SCHEMA)

    assert _failed_checks(silver.RECORDINGS_ENRICHED, df) == set()
    assert silver.RECORDINGS_ENRICHED.structure_errors(df) == []


def test_bad_silver_rows_fail_the_rules_they_break(spark):
    df = spark.createDataFrame(
        [silver_row(), silver_row(mrn=-1), silver_row(heartrate=0.0), silver_row(name=None)], SILVER_SCHEMA
    )

    failed = _failed_checks(silver.RECORDINGS_ENRICHED, df)

    assert failed == {"mrn_positive", "heartrate_positive", "known_patient"}


def test_structure_errors_name_the_column(spark):
    df = spark.createDataFrame([silver_row()], SILVER_SCHEMA)
    wrong = df.withColumn("mrn", F.col("mrn").cast("int")).drop("heartrate").withColumn("extra", F.lit(1))

    errors = silver.RECORDINGS_ENRICHED.structure_errors(wrong)

    by_check = {(e.column, e.check.split("(")[0]) for e in errors}
    assert ("mrn", "dtype") in by_check
    assert any("heartrate" in e.error for e in errors)  # missing column
    assert any("extra" in e.error for e in errors)  # silver is strict


def test_bronze_accepts_malformed_records_but_needs_its_metadata_columns(spark):
    rows = [bronze_row(), bronze_row(None, None, None, None, rescued='{"_raw": "{"}')]
    df = spark.createDataFrame(rows, BRONZE_SCHEMA)

    assert bronze.RECORDINGS.structure_errors(df) == []
    # A malformed record is only a warning at bronze, but it is reported.
    assert _failed_checks(bronze.RECORDINGS, df) == {"rescued_data_empty"}
    missing = bronze.RECORDINGS.structure_errors(df.drop("_source_file"))
    assert any("_source_file" in e.error for e in missing)


def test_bronze_may_grow_columns(spark):
    df = spark.createDataFrame([bronze_row()], BRONZE_SCHEMA).withColumn("battery", F.lit(0.5))

    assert bronze.RECORDINGS.structure_errors(df) == []


def test_quarantine_rows_must_say_why(spark):
    df = spark.createDataFrame([bronze_row()], BRONZE_SCHEMA)
    with_reason = df.withColumn("_quarantine_reason", F.lit("known_patient"))
    without = df.withColumn("_quarantine_reason", F.lit(None).cast("string"))

    assert _failed_checks(silver.RECORDINGS_QUARANTINE, with_reason) == set()
    assert _failed_checks(silver.RECORDINGS_QUARANTINE, without) == {"quarantine_reason_present"}


def test_gold_rejects_two_rows_for_one_patient_day(spark):
    day = dt.datetime(2020, 3, 1, tzinfo=UTC)
    rows = [(10000001, "Ann Lee", 71.0, day), (10000001, "Ann Lee (renamed)", 73.0, day),
            (10000002, "Bo Chan", 350.0, day)]
    df = spark.createDataFrame(rows, GOLD_AVG_SCHEMA)

    failed = _failed_checks(gold.DAILY_PATIENT_AVG, df)

    assert failed == {"one_row_per_patient_day", "avg_heartrate_in_range"}
    assert _failed_checks(gold.DAILY_PATIENT_AVG, df.where("avg_heartrate < 300 AND name = 'Ann Lee'")) == set()
