"""Bad records go to silver/recordings_quarantine with their reasons; nothing is lost."""

from __future__ import annotations

import json

import dagster as dg
import pytest
from deltalake import DeltaTable

from lakehouse_assets.reliability.flows import project_flows
from lakehouse_assets.reliability.routed import check_routed
from lakehouse_assets_tests.assets.pipeline import (
    TO_SILVER,
    delta_rows,
    materialization_metadata,
    materialize,
)
from lakehouse_assets_tests.ingestion.helpers import json_lines
from lakehouse_assets_tests.ingestion.helpers import land as land_file


def quarantine_by_kind(settings) -> dict[str, int]:
    """Quarantined rows by the first reason that explains them, as the simulator counts kinds."""
    counts = {"rescued": 0, "unknown_patient": 0, "non_positive_heartrate": 0, "other": 0}
    for (reason,) in delta_rows(settings, "silver", "recordings_quarantine", ["_quarantine_reason"]):
        rules = reason.split(",")
        if "rescued_data_empty" in rules:
            counts["rescued"] += 1
        elif "known_patient" in rules:
            counts["unknown_patient"] += 1
        elif "heartrate_positive" in rules:
            counts["non_positive_heartrate"] += 1
        else:
            counts["other"] += 1
    return counts


def table_rows(settings, layer: str, name: str) -> list[dict]:
    """Every row of a table, read by delta-rs."""
    return DeltaTable(str(settings.table_path(layer, name))).to_pyarrow_table().to_pylist()


def assert_nothing_lost(settings) -> tuple[int, int, int]:
    bronze = len(delta_rows(settings, "bronze", "recordings", ["_source_file"]))
    silver = len(delta_rows(settings, "silver", "recordings_enriched", ["mrn"]))
    quarantined = len(delta_rows(settings, "silver", "recordings_quarantine", ["_source_file"]))
    assert bronze == silver + quarantined
    return bronze, silver, quarantined


@pytest.mark.slow
def test_bad_records_are_quarantined_with_reasons_across_incremental_runs(built):
    settings, landed = built.settings, built.recordings
    assert landed.counts.bad > 0
    # The build's first run took the landed files.
    run = materialization_metadata(built.seeds_run.result)

    bronze, silver, quarantined = assert_nothing_lost(settings)
    assert bronze == landed.counts.total
    assert silver == landed.counts.good
    assert quarantined == landed.counts.bad
    assert run["silver/recordings_quarantine"]["rows_written"] == landed.counts.bad
    assert quarantine_by_kind(settings) == {
        "rescued": landed.counts.malformed + landed.counts.wrong_type,
        "unknown_patient": landed.counts.unknown_patient,
        "non_positive_heartrate": landed.counts.non_positive_heartrate,
        "other": 0,
    }

    more = built.land_recordings(files=2)
    run = materialization_metadata(materialize(TO_SILVER))

    bronze, silver, quarantined = assert_nothing_lost(settings)
    assert bronze == landed.counts.total + more.counts.total
    assert quarantined == landed.counts.bad + more.counts.bad
    assert run["silver/recordings_quarantine"]["rows_written"] == more.counts.bad
    # The quarantine's materialization names the commit this run made to it.
    assert run["silver/recordings_quarantine"]["written_version"] == DeltaTable(
        str(settings.table_path("silver", "recordings_quarantine"))).version()
    # This run's expectation counts, read from silver's commits, agree with what it quarantined.
    silver_run = run["silver/recordings_enriched"]
    assert silver_run["expectations/rows_checked"] == more.counts.total
    assert silver_run["expectations/known_patient/failed"] >= more.counts.unknown_patient
    assert silver_run["expectations/heartrate_positive/failed"] >= more.counts.non_positive_heartrate
    assert silver_run["expectations/rescued_data_empty/failed"] == more.counts.malformed + more.counts.wrong_type
    assert silver_run["expectations/device_id_present/passed"] + silver_run[
        "expectations/device_id_present/failed"] == more.counts.total
    # Every quarantined row keeps the file it came from.
    sources = {source for (source,) in delta_rows(settings, "silver", "recordings_quarantine", ["_source_file"])}
    assert all(source.endswith(".json") for source in sources)


@pytest.mark.slow
def test_a_new_landed_field_flows_to_bronze_and_the_quarantine_and_gold_keeps_working(built):
    """Issue 17's stuck graph: a field new in landed JSON reaches bronze in the same run, the
    quarantine (which keeps refused rows whole) gains the column, silver keeps its declared
    columns, gold goes on, and every landed record is still accounted for."""
    settings = built.settings
    silver_before = len(delta_rows(settings, "silver", "recordings_enriched", ["mrn"]))
    known_mrn = delta_rows(settings, "silver", "recordings_enriched", ["mrn"])[0][0]
    land_file(settings.landing_path("recordings"), "zz-with-spo2.json", json_lines([
        {"device_id": 900, "mrn": known_mrn, "time": 1_700_000_000.0, "heartrate": 70.0, "spo2": 97.5},
        {"device_id": 901, "mrn": 1, "time": 1_700_000_001.0, "heartrate": 71.0, "spo2": 98.5},  # unknown patient
    ]))

    device_counts = dg.AssetSelection.assets(dg.AssetKey(["gold", "device_counts"])).without_checks()
    run = materialization_metadata(materialize(TO_SILVER | device_counts))

    assert sorted(r["spo2"] for r in table_rows(settings, "bronze", "recordings") if r["spo2"] is not None) == [97.5, 98.5]
    assert run["bronze/recordings"]["query_restarts"] == 1
    quarantined = table_rows(settings, "silver", "recordings_quarantine")
    assert [(r["mrn"], r["spo2"]) for r in quarantined if r["spo2"] is not None] == [(1, 98.5)]
    assert len(delta_rows(settings, "silver", "recordings_enriched", ["mrn"])) == silver_before + 1
    assert "spo2" not in {c.name for c in run["silver/recordings_enriched"]["dagster/column_schema"].columns}
    assert (900, 1) in delta_rows(settings, "gold", "device_counts", ["device_id", "total_recordings"])
    assert_nothing_lost(settings)


@pytest.mark.slow
def test_a_file_landed_twice_and_a_resent_record_are_quarantined_as_duplicates(built):
    """Records landed twice reach silver once; every later copy is in the quarantine with the
    reason `duplicate` and the file it came from, and bronze = silver + quarantine holds."""
    settings = built.settings
    silver_before = len(delta_rows(settings, "silver", "recordings_enriched", ["mrn"]))
    # Only good records: a bad one is quarantined for what it is, not as a duplicate.
    again = built.good_lines(file=1)
    land_file(settings.landing_path("recordings"), "zz-landed-again.json", again)
    resent = json.loads(again.splitlines()[0])
    new_reading = {**resent, "time": resent["time"] + 60, "device_id": 999_999}
    land_file(settings.landing_path("recordings"), "zz-resent.json", json_lines([resent, new_reading, new_reading]))

    run = materialization_metadata(materialize(TO_SILVER))

    copies = len(again.splitlines()) + 2  # the file again, the re-sent record, the new reading's repeat
    assert len(delta_rows(settings, "silver", "recordings_enriched", ["mrn"])) == silver_before + 1
    duplicates = [(source.rsplit("/", 1)[-1]) for source, reason in delta_rows(
        settings, "silver", "recordings_quarantine", ["_source_file", "_quarantine_reason"]) if reason == "duplicate"]
    assert sorted(duplicates) == sorted(["zz-landed-again.json"] * (copies - 2) + ["zz-resent.json"] * 2)
    assert run["silver/recordings_enriched"]["duplicates_quarantined"] == copies
    assert_nothing_lost(settings)
    assert check_routed(settings, project_flows()).ok
