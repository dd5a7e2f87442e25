"""A full refresh of bronze while silver and gold stream from it.

The refresh recreates bronze (a new Delta table id); the downstream checkpoints hold
positions in the old table. What a data engineer gets: the next downstream run stops before
reading anything, saying which upstream table was recreated and to full-refresh the
downstream tables; after doing so, every table is whole again, nothing lost or repeated.
"""

from __future__ import annotations

import pytest

from lakehouse_assets.reliability.invariants import check_all
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets_tests.assets.pipeline import SEED_WITHOUT_CHECKS, materialization_metadata, materialize
from lakehouse_assets_tests.reliability.test_checkpoint_repair import failure_text

DOWNSTREAM_OPS = ("silver__recordings_enriched", "gold__daily_patient_avg", "gold__device_counts")


def full_refresh(*ops: str) -> dict:
    return {"ops": {op: {"config": {"full_refresh": True}} for op in ops}}


@pytest.mark.slow
def test_downstream_of_a_refreshed_table_stops_and_is_whole_after_refreshing_it(built):
    settings = built.settings
    materialize("bronze/recordings", run_config=full_refresh("bronze__recordings"))
    built.land_recordings(files=1)

    with pytest.raises(Exception) as info:
        materialize(["silver/patients", "silver/recordings_enriched", "silver/recordings_quarantine"])
    text = failure_text(info.value)
    assert "bronze.recordings" in text and "was recreated" in text
    assert "Full-refresh silver.recordings_enriched" in text and "lakehouse reset silver.recordings_enriched" in text

    run = materialization_metadata(materialize(SEED_WITHOUT_CHECKS, run_config=full_refresh(*DOWNSTREAM_OPS)))

    assert run["silver/recordings_quarantine"]["rows_written"] > 0  # the refresh keeps what it wrote
    report = check_all(LakehouseResource.from_settings(settings))
    assert report.ok, [str(v) for v in report.violations]
