"""A routed table selected alone, or its quarantine alone: the one query still writes both,
each batch whole, and the run reports both as materialized."""

from __future__ import annotations

import pytest

from lakehouse_assets.reliability.flows import project_flows
from lakehouse_assets.reliability.routed import check_routed
from lakehouse_assets_tests.assets.pipeline import materialization_metadata, materialize, tables
from lakehouse_assets_tests.assets.test_quarantine import assert_nothing_lost

PAIR = {"silver/recordings_enriched", "silver/recordings_quarantine"}


@pytest.mark.slow
def test_selecting_either_table_of_a_routed_pair_writes_and_reports_both(built):
    settings = built.settings
    bronze_before, silver_before, quarantined_before = assert_nothing_lost(settings)
    landed = built.land_recordings(files=1)
    assert landed.counts.bad > 0
    materialize(tables("bronze/recordings"))

    result = materialize(tables("silver/recordings_enriched"))

    # One step wrote both tables (the UI shows the pair as one), and both are materialized.
    assert {event.step_key for event in result.get_asset_materialization_events()} == {"silver__recordings_enriched"}
    run = materialization_metadata(result)
    assert set(run) == PAIR
    bronze, silver, quarantined = assert_nothing_lost(settings)
    assert (bronze, silver, quarantined) == (bronze_before + landed.counts.total, silver_before + landed.counts.good,
                                             quarantined_before + landed.counts.bad)
    assert run["silver/recordings_quarantine"]["rows_written"] == landed.counts.bad
    assert run["silver/recordings_quarantine"]["dagster/row_count"] == quarantined
    assert run["silver/recordings_enriched"]["dagster/row_count"] == silver
    assert check_routed(settings, project_flows()).ok

    more = built.land_recordings(files=1)
    materialize(tables("bronze/recordings"))

    run = materialization_metadata(materialize(tables("silver/recordings_quarantine")))

    assert set(run) == PAIR
    bronze, silver, quarantined = assert_nothing_lost(settings)
    assert bronze == bronze_before + landed.counts.total + more.counts.total
    assert quarantined == quarantined_before + landed.counts.bad + more.counts.bad
    assert run["silver/recordings_quarantine"]["rows_written"] == more.counts.bad
    assert run["silver/recordings_enriched"]["expectations/rows_checked"] == more.counts.total
    assert run["silver/recordings_enriched"]["dagster/row_count"] == silver
    assert check_routed(settings, project_flows()).ok
