"""``lakehouse upgrade``: checkpoints with the old Delta source's positions become Delta's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakehouse_assets.errors import LegacyCheckpointError
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.storage._checkpoint_files import read_state
from lakehouse_assets.storage.checkpoint_agreement import check_sources
from lakehouse_assets_tests.cli.helpers import Runner, delta_offset, write_checkpoint, write_table


def _legacy(table: Path, version: int, index: int, *, snapshot: bool) -> str:
    """A position as the project's own Delta source logged it."""
    return json.dumps({"version": version, "index": index, "snapshot": snapshot, "table": str(table),
                       "tableId": DeltaTable(str(table)).metadata().id})


def _source_line(checkpoint: Path, batch: int) -> str:
    return (checkpoint / "offsets" / str(batch)).read_text().splitlines()[2]


def test_old_positions_become_deltas_for_the_same_rows_once(root: Path, lakehouse: Runner) -> None:
    bronze = write_table(root, "bronze.recordings", {"x": [1, 2]})
    write_table(root, "bronze.recordings", {"x": [3]})  # version 1: one file
    first = _legacy(bronze, 0, 0, snapshot=True)  # batch 0 read the snapshot of version 0
    checkpoint = write_checkpoint(root, "silver.enriched", committed=1, planned=1, offset=first)
    # Batch 1 read version 1's one file: the commit read whole.
    (checkpoint / "offsets" / "1").write_text(
        f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":1}}\n{_legacy(bronze, 1, 0, snapshot=False)}\n')
    (checkpoint / "offsets" / ".1.crc").unlink()

    check = lakehouse("upgrade", "--check")
    assert check.code == 1, check
    assert "silver.enriched" in check.stdout
    assert _source_line(checkpoint, 0) == first  # --check changes nothing

    upgraded = lakehouse("upgrade")

    assert upgraded.code == 0, upgraded
    assert json.loads(_source_line(checkpoint, 0)) == json.loads(delta_offset(bronze, 0))
    assert json.loads(_source_line(checkpoint, 1)) == json.loads(delta_offset(bronze, 1))
    assert not (checkpoint / "offsets" / ".0.crc").exists()  # the old text's checksum went with it
    again = lakehouse("upgrade")
    assert again.code == 0 and "Nothing to upgrade" in again.stdout, again


def test_a_version_read_in_part_is_refused_and_nothing_changes(root: Path, lakehouse: Runner) -> None:
    bronze = write_table(root, "bronze.recordings", {"x": [1]})
    write_table(root, "bronze.recordings", {"x": [2]})  # the snapshot of version 1: two files
    part = _legacy(bronze, 1, 0, snapshot=True)
    checkpoint = write_checkpoint(root, "silver.enriched", committed=0, planned=0, offset=part)

    refused = lakehouse("upgrade")

    assert refused.code == 1, refused
    assert str(checkpoint) in refused.stderr and "1 of the 2 files of version 1" in refused.stderr, refused
    assert _source_line(checkpoint, 0) == part


def test_a_run_over_old_positions_stops_naming_upgrade_and_goes_on_after_it(root: Path, lakehouse: Runner) -> None:
    bronze = write_table(root, "bronze.recordings", {"x": [1]})
    checkpoint = write_checkpoint(root, "silver.enriched", committed=0, planned=0,
                                  offset=_legacy(bronze, 0, 0, snapshot=True))
    store = DeltaTableStore()

    with pytest.raises(LegacyCheckpointError, match="Run `lakehouse upgrade` once"):
        check_sources(read_state(str(checkpoint)), store, "silver.enriched", root)
    assert lakehouse("upgrade").code == 0
    check_sources(read_state(str(checkpoint)), store, "silver.enriched", root)  # the table is found by its id
