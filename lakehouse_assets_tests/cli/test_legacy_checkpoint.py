"""A checkpoint with the positions of the Delta source that releases before Delta Lake's
connector used: the run stops naming the reset that rebuilds the table, and after it the
table's query starts afresh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakehouse_assets.checkpoints.agreement import check_sources
from lakehouse_assets.checkpoints.logs import read_state
from lakehouse_assets.errors import LakehouseError, LegacyCheckpointError
from lakehouse_assets.location import locate
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets_tests.cli.helpers import Runner, delta_offset, write_checkpoint, write_table


def test_a_run_over_old_positions_stops_naming_the_reset_that_rebuilds_its_table(
        root: Path, lakehouse: Runner) -> None:
    bronze = write_table(root, "bronze.recordings", {"x": [1]})
    legacy = json.dumps({"version": 0, "index": 0, "snapshot": True, "table": str(bronze),
                         "tableId": DeltaTable(str(bronze)).metadata().id})
    checkpoint = write_checkpoint(root, "silver.enriched", committed=0, planned=0, offset=legacy)
    store = DeltaTableStore()

    with pytest.raises(LegacyCheckpointError, match=r"`lakehouse reset silver\.enriched --yes`"):
        check_sources(read_state(str(checkpoint)), store, "silver.enriched", locate(root))
    reset = lakehouse("reset", "silver.enriched", "--yes")
    assert reset.code == 0, reset
    assert not checkpoint.exists()  # the table's next run starts from its sources' beginning

    # Delta's own positions, the same table: nothing to refuse.
    current = write_checkpoint(root, "silver.enriched", committed=0, planned=0, offset=delta_offset(bronze, 0))
    check_sources(read_state(str(current)), store, "silver.enriched", locate(root))


def test_a_delta_offset_of_an_unknown_serialization_is_refused_by_name(root: Path) -> None:
    bronze = write_table(root, "bronze.recordings", {"x": [1]})
    offset = json.loads(delta_offset(bronze, 0))
    newer = write_checkpoint(root, "silver.enriched", committed=0, planned=0,
                             offset=json.dumps({**offset, "sourceVersion": 4}))

    with pytest.raises(LakehouseError, match=r"silver\.enriched: checkpoint .*serialization version 4.*reads versions 1, 3"):
        check_sources(read_state(str(newer)), DeltaTableStore(), "silver.enriched", locate(root))
    # Version 3 (a schema change tracked) is Delta's own: read.
    tracked = write_checkpoint(root, "silver.tracked", committed=0, planned=0,
                               offset=json.dumps({**offset, "sourceVersion": 3, "index": -20}))
    check_sources(read_state(str(tracked)), DeltaTableStore(), "silver.tracked", locate(root))
