"""The invariant checker can fail: each corruption of a sound lakehouse is reported, with its table."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from lakehouse_assets.cli import main as lakehouse
from lakehouse_assets.location import locate
from lakehouse_assets.quality.expectations import EXPECTATIONS_KEY
from lakehouse_assets.reliability import check_all
from lakehouse_assets.reliability.invariants import (
    GOLD_RECOMPUTED,
    LANDED_ONCE,
    ROUTED,
    VERSIONS_WHOLE,
)
from lakehouse_assets.reliability.landed import json_record_count
from lakehouse_assets.reliability.table_reader import read_rows, snapshot_files
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.assets.pipeline import SEED_WITHOUT_CHECKS, materialize


@pytest.fixture
def lakehouse_copy(built) -> LakehouseSettings:
    """The reference lakehouse as built, the whole graph over landed bad records and patient
    changes (a copy of its own: corrupt it at will)."""
    return built.settings


def violations(settings: LakehouseSettings, name: str, *, pending_ok: bool = False) -> list[str]:
    return [str(v) for v in check_all(LakehouseResource.from_settings(settings), pending_ok=pending_ok).result(name).violations]


@pytest.mark.slow
def test_a_sound_lakehouse_keeps_every_invariant(lakehouse_copy, capsys):
    report = check_all(LakehouseResource.from_settings(lakehouse_copy))

    assert report.ok, report.summary()
    assert not [r.name for r in report.results if r.skipped]
    assert lakehouse(["verify", "--root", str(lakehouse_copy.root)]) == 0
    assert "FAILED" not in capsys.readouterr().out


@pytest.mark.slow
def test_a_deleted_data_file_is_reported_and_verify_exits_1(lakehouse_copy, capsys):
    bronze = Path(lakehouse_copy.table_path("bronze", "recordings"))
    victim = snapshot_files(locate(bronze))[0]
    Path(victim.path).unlink()

    found = violations(lakehouse_copy, VERSIONS_WHOLE)

    assert len(found) == 1
    assert "bronze.recordings" in found[0] and "missing" in found[0] and victim.relative_path in found[0]
    assert lakehouse(["verify", "--root", str(lakehouse_copy.root)]) == 1
    out = capsys.readouterr().out
    assert "versions_whole         FAILED (1)" in out
    assert "[versions_whole] bronze.recordings: 1 data files of the latest version are missing" in out


@pytest.mark.slow
def test_a_landed_file_ingested_twice_is_reported_with_its_name(lakehouse_copy):
    bronze = Path(lakehouse_copy.table_path("bronze", "recordings"))
    rows = read_rows(locate(bronze))
    source = rows.column("_source_file")[0].as_py()
    one_file = rows.filter(pc.equal(rows.column("_source_file"), source))
    write_deltalake(str(bronze), one_file, mode="append")

    landed = violations(lakehouse_copy, LANDED_ONCE)
    routed = violations(lakehouse_copy, ROUTED)

    assert len(landed) == 1
    assert "ingested twice" in landed[0] and Path(source.removeprefix("file:")).name in landed[0]
    assert f"{one_file.num_rows} rows in bronze" not in landed[0]
    assert f"{2 * one_file.num_rows} rows in bronze" in landed[0]
    # The copies went neither to silver nor to quarantine.
    assert any("in neither silver.recordings_enriched nor silver.recordings_quarantine" in v for v in routed), routed
    assert violations(lakehouse_copy, GOLD_RECOMPUTED), "device_counts no longer matches bronze"


@pytest.mark.slow
def test_a_dropped_silver_row_is_reported_as_lost_and_gold_disagrees(lakehouse_copy):
    silver = Path(lakehouse_copy.table_path("silver", "recordings_enriched"))
    rows = read_rows(locate(silver))
    dropped = rows.slice(0, 1).to_pylist()[0]
    write_deltalake(str(silver), rows.slice(1), mode="overwrite")

    routed = violations(lakehouse_copy, ROUTED)

    assert len(routed) == 1
    assert ("silver.recordings_enriched: 1 bronze.recordings rows are in neither silver.recordings_enriched nor "
            "silver.recordings_quarantine (lost)") in routed[0]
    assert f"'mrn': {dropped['mrn']}" in routed[0] and f"'heartrate': {dropped['heartrate']}" in routed[0]
    gold = violations(lakehouse_copy, GOLD_RECOMPUTED)
    assert gold and all("gold.daily_patient_avg" in v for v in gold)
    assert f"mrn={dropped['mrn']}" in "".join(gold)


@pytest.mark.slow
def test_a_quarantined_row_that_bronze_lacks_is_reported(lakehouse_copy):
    quarantine = Path(lakehouse_copy.table_path("silver", "recordings_quarantine"))
    rows = read_rows(locate(quarantine))
    write_deltalake(str(quarantine), rows.slice(0, 1), mode="append")

    routed = violations(lakehouse_copy, ROUTED, pending_ok=True)

    assert len(routed) == 1
    assert "silver.recordings_quarantine: 1 quarantined rows are not bronze.recordings rows" in routed[0]


@pytest.mark.slow
def test_expectation_counts_committed_twice_for_one_batch_are_reported(lakehouse_copy):
    silver = Path(lakehouse_copy.table_path("silver", "recordings_enriched"))
    assert not violations(lakehouse_copy, ROUTED)
    # The last batch's commit says it checked 7 rows more than it wrote: as if it were counted twice.
    last = max((silver / "_delta_log").glob("*.json"))
    actions = [json.loads(line) for line in last.read_text().splitlines() if line.strip()]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    recorded = json.loads(info["userMetadata"])
    counts = json.loads(recorded[EXPECTATIONS_KEY])
    recorded[EXPECTATIONS_KEY] = json.dumps({**counts, "rows": counts["rows"] + 7})
    info["userMetadata"] = json.dumps(recorded)
    last.with_suffix(".crc").unlink(missing_ok=True)  # Delta's checksum of the version no longer holds
    last.write_text("".join(json.dumps(a) + "\n" for a in actions))

    routed = violations(lakehouse_copy, ROUTED, pending_ok=True)

    assert len(routed) == 1 and "silver.recordings_enriched" in routed[0] and "counted twice" in routed[0], routed


@pytest.mark.slow
def test_a_gold_table_that_differs_from_its_recomputation_is_reported(lakehouse_copy):
    counts = Path(lakehouse_copy.table_path("gold", "device_counts"))
    rows = read_rows(locate(counts))
    bumped = rows.set_column(rows.schema.get_field_index("total_recordings"), "total_recordings",
                             pc.add(rows.column("total_recordings"), pa.scalar(1, rows.schema.field("total_recordings").type)))
    write_deltalake(str(counts), bumped.slice(0, 1), mode="overwrite")

    found = violations(lakehouse_copy, GOLD_RECOMPUTED)

    text = "\n".join(found)
    device = rows.column("device_id")[0].as_py()
    assert f"device_id={device}: total_recordings={rows.column('total_recordings')[0].as_py() + 1}" in text
    assert "groups of the recomputation are missing" in text  # the other devices were dropped


@pytest.mark.slow
def test_a_half_written_version_is_reported(lakehouse_copy):
    silver = Path(lakehouse_copy.table_path("silver", "recordings_enriched"))
    version = DeltaTable(str(silver)).version() + 1
    (silver / "_delta_log" / f"{version:020d}.json").write_text('{"commitInfo":{"timestamp":1}}\n{"add":{"path":"x.par')

    found = violations(lakehouse_copy, VERSIONS_WHOLE, pending_ok=True)

    # Delta's history (delta-rs) cannot read the torn commit: said in one line, not with its backtrace.
    assert found and found[0].startswith("[versions_whole] silver.recordings_enriched: its history cannot be read: "), found
    assert "Json error" in found[0] and "\n" not in found[0]
    assert all("silver.recordings_enriched" in v and "pthread" not in v for v in found)


@pytest.mark.slow
def test_logs_cleaned_past_their_retention_keep_every_invariant(built):
    """Once commits are older than delta.logRetentionDuration, a log checkpoint lets delta-rs
    delete their files: the invariants that read the log check what it still holds, and do
    not mistake batches whose commit files are gone for batches never committed."""
    settings = built.settings
    # A second run with new data: every table of the seeds has a first batch whose commit file can go.
    built.land_recordings(files=1)
    materialize(SEED_WITHOUT_CHECKS)
    month_ago = time.time() - 31 * 24 * 3600
    for log in sorted(Path(settings.root).glob("**/_delta_log")):
        DeltaTable(str(log.parent)).create_checkpoint()
        for entry in log.iterdir():
            os.utime(entry, (month_ago, month_ago))
        DeltaTable(str(log.parent)).cleanup_metadata()  # what VACUUM and delta-rs's log checkpoints call
    for table in ("bronze/recordings", "silver/recordings_enriched"):
        assert not (settings.root / table / "_delta_log" / f"{0:020d}.json").exists(), f"{table}: nothing cleaned"

    report = check_all(LakehouseResource.from_settings(settings))

    assert report.ok, report.summary()


@pytest.mark.slow
def test_files_not_ingested_yet_fail_only_without_pending(built, lakehouse_copy):
    new = built.land_recordings(files=1)

    strict = violations(lakehouse_copy, LANDED_ONCE)

    assert len(strict) == 1 and "1 landed files are not in bronze" in strict[0]
    assert new.paths[0].name in strict[0]
    assert check_all(LakehouseResource.from_settings(lakehouse_copy), pending_ok=True).ok


def test_record_counts_follow_the_line_rules_of_ingestion(tmp_path):
    file = tmp_path / "a.json"
    file.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\n   \n{"a": 2}\r{"a": 3\n[{"a": 4}, {"a": 5}]\n[]\n[1, 2]\n\xff\xfe')

    # Two objects, a malformed line, an array of two, an empty array, an array of
    # non-objects (one malformed record), non-UTF-8 bytes (one malformed record).
    assert json_record_count(locate(file)) == 2 + 1 + 2 + 0 + 1 + 1
