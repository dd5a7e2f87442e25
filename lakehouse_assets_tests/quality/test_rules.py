"""Each rule on hand-built rows: which pass, which fail, and that a null never slips through."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from pyspark.sql import functions as F

from lakehouse_assets.quality import bronze, gold, silver
from lakehouse_assets.quality.contract import Contract
from lakehouse_assets.quality.rules import Rule, Severity, not_null, rules_reading

UTC = dt.UTC
NOW = dt.datetime.now(UTC)
Y2K = dt.datetime(2000, 1, 1, tzinfo=UTC)

# rule, Spark type of the column it reads, [(value, passes)]
CASES = [
    (bronze.RESCUED_DATA_EMPTY, "string", [
        (None, True), ("", True), ("  ", True), ("{}", True),
        ('{"heartrate": "abc", "_file": "f.json"}', False), ('{"_raw": "{\\"device_id\\": 1"}', False),
    ]),
    (silver.KNOWN_PATIENT, "string", [("Ann Lee", True), ("", True), (None, False)]),
    (silver.MRN_POSITIVE, "bigint", [(1, True), (23456789, True), (0, False), (-5, False), (None, False)]),
    (silver.HEARTRATE_POSITIVE, "double", [
        (72.5, True), (0.01, True), (0.0, False), (-1.0, False), (None, False),
    ]),
    # Bronze infers its types: a numeric field can arrive as a string column. A rule judges
    # such values (a number in text passes) instead of failing the query under ANSI mode.
    (silver.HEARTRATE_POSITIVE, "string", [("75.46", True), ("0", False), ("abc", False), (None, False)]),
    (silver.MRN_POSITIVE, "string", [("10000001", True), ("-3", False), ("n/a", False)]),
    (silver.HEARTRATE_IN_RANGE, "double", [
        (72.5, True), (300.0, True), (300.01, False), (-1.0, True), (None, False), (math.nan, False),
    ]),
    # Bronze keeps time as Unix seconds ...
    (silver.TIME_PLAUSIBLE, "double", [
        (1.6e9, True), (Y2K.timestamp(), True), (Y2K.timestamp() - 1, False), (0.0, False), (None, False),
        ((NOW + dt.timedelta(hours=1)).timestamp(), True), ((NOW + dt.timedelta(days=2)).timestamp(), False),
    ]),
    # ... silver as a timestamp: the same rule reads both.
    (silver.TIME_PLAUSIBLE, "timestamp", [
        (dt.datetime(2020, 9, 13, tzinfo=UTC), True), (Y2K, True), (Y2K - dt.timedelta(seconds=1), False),
        (None, False), (NOW + dt.timedelta(hours=1), True), (NOW + dt.timedelta(days=2), False),
    ]),
    (silver.DEVICE_ID_PRESENT, "bigint", [(7, True), (0, True), (None, False)]),
    (gold.AVG_HEARTRATE_IN_RANGE, "double", [
        (0.5, True), (300.0, True), (0.0, False), (300.5, False), (None, False),
    ]),
    (gold.TOTAL_RECORDINGS_POSITIVE, "bigint", [(1, True), (0, False), (None, False)]),
    (silver.QUARANTINE_REASON_PRESENT, "string", [("known_patient", True), (None, False)]),
]


@pytest.mark.parametrize(
    ("rule", "spark_type", "cases"), CASES, ids=[f"{rule.name}-{t}" for rule, t, _ in CASES]
)
def test_rule_passes_exactly_the_rows_it_should(spark, rule: Rule, spark_type: str, cases):
    column = rule.columns[0]
    df = spark.createDataFrame(
        [(i, value) for i, (value, _) in enumerate(cases)], f"case INT, `{column}` {spark_type}"
    )

    rows = df.select("case", rule.condition().alias("passes"), rule.failed().alias("fails")).collect()

    assert {r.case: r.passes for r in rows} == {i: passes for i, (_, passes) in enumerate(cases)}, [c[0] for c in cases]
    # Never NULL: a null would be neither passed nor failed, and a row would vanish.
    assert {r.case: r.fails for r in rows} == {i: not passes for i, (_, passes) in enumerate(cases)}


EXPECTED_SEVERITIES = {
    "rescued_data_empty": Severity.ERROR,
    "known_patient": Severity.ERROR,
    "mrn_positive": Severity.ERROR,
    "heartrate_positive": Severity.ERROR,
    "heartrate_in_range": Severity.ERROR,
    "time_plausible": Severity.ERROR,
    "device_id_present": Severity.WARN,
}


def test_routing_rules_and_their_severities():
    assert {r.name: r.severity for r in silver.ROUTING_RULES} == EXPECTED_SEVERITIES


def test_silver_table_checks_are_the_routing_rules_it_can_read():
    # The same objects, not copies: the stream and the checks cannot disagree.
    assert all(any(r is s for s in silver.ROUTING_RULES) for r in silver.RECORDINGS_ENRICHED.rules)
    assert {r.name for r in silver.RECORDINGS_ENRICHED.rules} == set(EXPECTED_SEVERITIES) - {"rescued_data_empty"}


def test_bronze_reports_rescued_data_as_a_warning_with_the_same_condition():
    at_bronze = next(r for r in bronze.RECORDINGS.rules if r.name == "rescued_data_empty")
    assert at_bronze.severity is Severity.WARN
    assert at_bronze.build is bronze.RESCUED_DATA_EMPTY.build


def test_rules_reading_keeps_the_rules_whose_columns_exist():
    assert [r.name for r in rules_reading(silver.ROUTING_RULES, ["HEARTRATE", "name"])] == [
        "known_patient", "heartrate_positive", "heartrate_in_range",
    ]


def test_a_rule_name_must_be_a_check_name():
    with pytest.raises(ValueError, match="asset check name"):
        not_null("x", name="Has Spaces")


def test_a_contract_refuses_a_rule_on_a_column_its_model_lacks():
    with pytest.raises(ValueError, match="_rescued_data"):
        Contract("silver", "recordings_enriched", silver.RecordingsEnriched, rules=(bronze.RESCUED_DATA_EMPTY,))


def test_conditions_are_built_lazily_and_compose(spark):
    # Building many conditions and combining them is plain Column algebra.
    df = spark.createDataFrame([(1, "a"), (-1, None)], "mrn BIGINT, name STRING")
    both = silver.MRN_POSITIVE.condition() & silver.KNOWN_PATIENT.condition()
    assert [r[0] for r in df.orderBy(F.col("mrn").desc()).select(both).collect()] == [True, False]
