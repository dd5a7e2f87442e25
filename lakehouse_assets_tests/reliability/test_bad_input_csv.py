"""Bad input, the patients lookup's CSV (issue 8): columns in another order or letter case, a
missing column, an extra column, values that do not fit, in one file among several. Columns
are matched by header name; a file that would load wrongly fails the load by name, the table
keeps its last good version, and the recordings pipeline goes on with it."""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.assets.silver import PATIENTS_SCHEMA
from lakehouse_assets.ingestion import LookupCsvError, read_lookup_csv
from lakehouse_assets.location import spark_file_uri
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import land as land_recordings
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata, materialize
from lakehouse_assets_tests.ingestion.helpers import land

RECORDINGS_PIPELINE = ["bronze/recordings", "silver/recordings_enriched", "silver/recordings_quarantine"]


def rows(spark: SparkSession, folder: Path) -> list[tuple]:
    return sorted(tuple(r) for r in read_lookup_csv(spark, folder, PATIENTS_SCHEMA).rows.collect())


def test_columns_are_matched_by_header_name_in_any_order_and_case(spark: SparkSession, tmp_path: Path) -> None:
    land(tmp_path, "a.csv", "mrn,name\n1,Ada Lovelace\n")
    land(tmp_path, "b.csv", "Name,MRN\nBob Stone,2\n")  # swapped, other case: by position it would fail

    assert rows(spark, tmp_path) == [(1, "Ada Lovelace"), (2, "Bob Stone")]


def test_a_file_missing_a_column_fails_naming_the_file_the_column_and_what_to_do(
    spark: SparkSession, tmp_path: Path
) -> None:
    land(tmp_path, "good.csv", "mrn,name\n1,Ada Lovelace\n")
    bad = land(tmp_path, "bad.csv", "mrn,full_name\n2,Bob Stone\n")

    with pytest.raises(LookupCsvError) as raised:
        read_lookup_csv(spark, tmp_path, PATIENTS_SCHEMA)

    message = str(raised.value)
    assert spark_file_uri(str(bad)) in message and "good.csv" not in message
    assert "has no column 'name'" in message and "its header has 'mrn', 'full_name'" in message
    assert "keeps its last good version" in message and "land it again" in message


def test_an_extra_column_is_ignored_and_named(spark: SparkSession, tmp_path: Path) -> None:
    land(tmp_path, "a.csv", "mrn,name\n1,Ada Lovelace\n")
    wide = land(tmp_path, "b.csv", "ward,name,mrn\n7,Bob Stone,2\n")

    lookup = read_lookup_csv(spark, tmp_path, PATIENTS_SCHEMA)

    assert sorted(tuple(r) for r in lookup.rows.collect()) == [(1, "Ada Lovelace"), (2, "Bob Stone")]
    assert lookup.ignored_columns == {spark_file_uri(str(wide)): ("ward",)}
    assert [m for m in lookup.warnings() if "'ward'" in m and spark_file_uri(str(wide)) in m]


def test_values_that_do_not_fit_fail_naming_the_file_and_rows_not_vanish(spark: SparkSession, tmp_path: Path) -> None:
    """Loaded as null (or dropped), mrn "abc" would make the patient unknown downstream, their
    recordings quarantined for the wrong reason: the load fails instead, naming each row."""
    land(tmp_path, "a.csv", "mrn,name\n1,Ada Lovelace\n")
    bad = land(tmp_path, "b.csv", "mrn,name\nabc,Bob Stone\n3,Cy Young,extra\n4,Di Prince\n")

    with pytest.raises(LookupCsvError) as raised:
        read_lookup_csv(spark, tmp_path, PATIENTS_SCHEMA)

    message = str(raised.value)
    assert "2 rows do not fit" in message
    assert f"{spark_file_uri(str(bad))} row 'abc,Bob Stone': mrn 'abc' is not a BIGINT" in message
    assert "row '3,Cy Young,extra': its number of values differs from its header's" in message
    assert "Di Prince" not in message


@pytest.mark.slow
def test_a_bad_patients_file_keeps_the_last_good_table_and_recordings_flow_on(
    spark: SparkSession, settings: LakehouseSettings
) -> None:
    """Through Dagster: an extra column is a warning in the run and metadata; a missing column
    fails the patients step by name, the table is not overwritten, and recordings landed
    afterwards are enriched from the last good patients table."""
    landing = Path(settings.root) / "landing"
    first = land_recordings(landing, files=1, records_per_file=50, seed=11)
    simulated = first.patients_path.read_text().splitlines()[1:]
    # A second file, its columns in another order and one more: new patients (mrns the
    # simulator never gives) with their ward.
    wide = land(first.patients_path.parent, "transfers.csv", "Name,MRN,ward\nAda Lovelace,1,W1\nBob Stone,2,W2\n")
    instance = dg.DagsterInstance.ephemeral()

    result = materialize(["silver/patients", *RECORDINGS_PIPELINE], instance=instance)

    assert materialization_metadata(result)["silver/patients"]["columns_ignored"] == {spark_file_uri(str(wide)): ["ward"]}
    warnings = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]
    assert any("'ward'" in w and spark_file_uri(str(wide)) in w for w in warnings)
    good_patients = delta_rows(settings, "silver", "patients", ["mrn", "name"])
    assert len(good_patients) == len(simulated) + 2 and (1, "Ada Lovelace") in good_patients
    enriched = delta_rows(settings, "silver", "recordings_enriched", ["mrn", "name"])
    assert len(enriched) == first.counts.total and all(name for _, name in enriched)

    land(first.patients_path.parent, "late.csv", "mrn\n3\n")
    with pytest.raises(Exception, match="has no column 'name'"):
        materialize(["silver/patients"], instance=instance)
    assert delta_rows(settings, "silver", "patients", ["mrn", "name"]) == good_patients

    second = land_recordings(landing, files=1, records_per_file=50, seed=11)
    materialize(RECORDINGS_PIPELINE, instance=instance)

    enriched = delta_rows(settings, "silver", "recordings_enriched", ["mrn", "name"])
    assert len(enriched) == first.counts.total + second.counts.total
    names = dict(good_patients)
    assert all(name == names[mrn] for mrn, name in enriched)
