"""Bad records go to silver/recordings_quarantine with their reasons; nothing is lost."""

from __future__ import annotations

import pytest

from lakehouse_assets.simulator import land
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata, materialize

LANDING_OPTIONS = dict(records_per_file=400, bad_rate=0.05, seed=23, files_per_year=365)


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


def assert_nothing_lost(settings) -> tuple[int, int, int]:
    bronze = len(delta_rows(settings, "bronze", "recordings", ["_source_file"]))
    silver = len(delta_rows(settings, "silver", "recordings_enriched", ["mrn"]))
    quarantined = len(delta_rows(settings, "silver", "recordings_quarantine", ["_source_file"]))
    assert bronze == silver + quarantined
    return bronze, silver, quarantined


@pytest.mark.slow
def test_bad_records_are_quarantined_with_reasons_across_incremental_runs(spark, settings):
    landed = land(settings.root / "landing", files=3, **LANDING_OPTIONS)
    assert landed.counts.bad > 0

    run = materialization_metadata(materialize("*"))

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

    more = land(settings.root / "landing", files=2, **LANDING_OPTIONS)
    run = materialization_metadata(materialize("*"))

    bronze, silver, quarantined = assert_nothing_lost(settings)
    assert bronze == landed.counts.total + more.counts.total
    assert quarantined == landed.counts.bad + more.counts.bad
    assert run["silver/recordings_quarantine"]["rows_written"] == more.counts.bad
    # Every quarantined row keeps the file it came from.
    sources = {source for (source,) in delta_rows(settings, "silver", "recordings_quarantine", ["_source_file"])}
    assert all(source.endswith(".json") for source in sources)
