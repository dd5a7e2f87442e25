"""``lakehouse verify`` and ``lakehouse trace`` with the root on S3-API object storage: the
invariants read the tables' history, data files and landed files where they are, on
a real server (s3proxy on loopback), and find a table damaged there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakehouse_assets.location import Location
from lakehouse_assets.reliability import check_all
from lakehouse_assets.reliability.invariants import (
    GOLD_RECOMPUTED,
    LANDED_ONCE,
    ROUTED,
)
from lakehouse_assets.reliability.table_reader import snapshot_files
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import land
from lakehouse_assets_tests.assets.pipeline import TO_SILVER, materialize, tables
from lakehouse_assets_tests.cli.in_process import run_in_process

RECORDINGS = "silver.recordings_enriched"


@pytest.mark.slow
def test_verify_and_trace_read_a_lakehouse_on_the_store(spark, store_settings: LakehouseSettings) -> None:
    settings = store_settings
    land(settings.root / "landing", files=2, records_per_file=40, bad_rate=0.1, seed=48, files_per_year=365)
    materialize(TO_SILVER | tables("silver/patients"))

    report = check_all(LakehouseResource.from_settings(settings))

    assert report.ok, report.summary()
    # Every invariant found its tables on the store (none is kept incrementally here).
    assert [r.name for r in report.results if r.skipped] == [GOLD_RECOMPUTED], report.summary()
    assert report.result(LANDED_ONCE).checked == ["bronze.recordings"]
    assert report.result(ROUTED).checked == [RECORDINGS]
    # Where a silver row came from: its landed file on the store, and the versions that carried it.
    traced = run_in_process(["trace", RECORDINGS, "--where", "heartrate > 0", "--limit", "1", "--json"],
                            root_env=None, extra_env={"LAKEHOUSE_ROOT": str(settings.root)}, spark_requested=True)
    assert traced.code == 0, traced.stderr
    [row] = json.loads(traced.stdout)["rows"]
    assert row["source_file"].startswith(f"{settings.root}/landing/recordings/") and row["source_line"] >= 1
    assert row["carried_by"] == [{"table": "bronze.recordings", "version": 0}, {"table": RECORDINGS, "version": 0}]

    # A data file removed from the store is reported by table and file, and verify exits 1.
    bronze = settings.table_path("bronze", "recordings")
    victim = snapshot_files(bronze)[0]
    Location(victim.path, bronze.store).remove()

    verified = run_in_process(["verify"], root_env=None, extra_env={"LAKEHOUSE_ROOT": str(settings.root)},
                              spark_requested=True)

    assert verified.code == 1, verified.stdout + verified.stderr
    assert ("[versions_whole] bronze.recordings: 1 data files of the latest version are missing"
            f"\n    {victim.relative_path}") in verified.stdout
    # Nothing was looked for on a local path named after the URL.
    assert not Path(settings.root.path).exists()
