"""The reference pipeline with its root on S3-API object storage (s3proxy on loopback), on a warm
Spark Connect engine as ``make run`` runs it (the engine given the store as a user's
environment gives it): landed files reach gold through Dagster; a later file reaches it from the checkpoints on the store,
with two runs of the same tables started at once (Delta's S3 log store assumes one writer per
table: the tables' locks on the store keep them one after the other); and gold matches what
the landed files say, computed without Spark, so no batch was lost or counted twice."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from lakehouse_assets.engine.files import EngineFiles
from lakehouse_assets.engine.server import start_engine, stop_engine
from lakehouse_assets.reliability import check_all
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import land
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets_tests.assets.pipeline import materialization_metadata, materialize
from lakehouse_assets_tests.conftest import SMALL_DATA_CONF, TEST_JVM_OPTIONS
from lakehouse_assets_tests.e2e.reference import daily_avg_differences, device_count_differences, expected_gold
from lakehouse_assets_tests.ports import free_port
from lakehouse_assets_tests.s3_server import S3Server

pytestmark = pytest.mark.slow

RECORDINGS = dict(records_per_file=300, bad_rate=0.0, seed=41, files_per_year=365)
#: The recordings' way to gold (and the patients lookup they are joined with).
TO_GOLD = ["bronze/recordings", "silver/patients", "silver/recordings_enriched", "gold/daily_patient_avg",
           "gold/device_counts"]


def _rows(settings: LakehouseSettings, layer: str, table: str) -> list[dict[str, Any]]:
    return DeltaTableStore(settings.object_store).snapshot(str(settings.table_path(layer, table))).to_arrow().to_pylist()


def _land(settings: LakehouseSettings, twin: Path, files: int) -> None:
    """Land ``files`` more recordings on the store, and the same beside them on the disk, which
    the expected gold is computed from."""
    land(settings.root / "landing", files=files, **RECORDINGS)  # type: ignore[arg-type]
    land(twin, files=files, **RECORDINGS)  # type: ignore[arg-type]


@pytest.fixture
def engine_on_store(on_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LakehouseSettings]:
    """A lakehouse on a new bucket of the server, and a managed engine of it started from the
    environment (the AWS variables included) as ``lakehouse engine start`` is, the runs attached
    to it (in the Connect pass too: this engine, not the pass's, which has no credentials)."""
    monkeypatch.setenv("LAKEHOUSE_ROOT", f"s3a://{on_s3.bucket(f'lake-{uuid.uuid4().hex[:12]}')}/lake")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the engine's pid, token and log
    monkeypatch.setenv("LAKEHOUSE_ENGINE_PORT", str(free_port()))
    monkeypatch.setenv("LAKEHOUSE_SPARK_CONF", json.dumps({**SMALL_DATA_CONF,
                                                           "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS}))
    settings = LakehouseSettings.from_env(dict(os.environ))
    status = start_engine(settings, timeout_seconds=120)
    try:
        token = EngineFiles.of(settings).read_token()
        monkeypatch.setenv("LAKEHOUSE_SPARK_REMOTE", f"sc://localhost:{status.port}/;token={token}")
        yield LakehouseSettings.from_env(dict(os.environ))
    finally:
        stop_engine(settings)


def _materialize_at_once(runs: int) -> list[dg.ExecuteInProcessResult]:
    start = threading.Barrier(runs)

    def run() -> dg.ExecuteInProcessResult:
        start.wait()
        return materialize(TO_GOLD)

    with ThreadPoolExecutor(runs) as pool:
        return [done.result() for done in [pool.submit(run) for _ in range(runs)]]


def test_landed_files_reach_gold_on_the_store_and_later_files_follow_with_two_runs_at_once(
        engine_on_store: LakehouseSettings, tmp_path: Path) -> None:
    store_settings = engine_on_store
    twin = tmp_path / "landing"
    for files, runs in ((2, 1), (1, 2)):
        _land(store_settings, twin, files)
        results = _materialize_at_once(runs)
        assert all(result.success for result in results)
        # One run read the new file; the other waited for the table and found nothing new: it
        # committed nothing to it.
        committed = ["rows_written" in materialization_metadata(r).get("bronze/recordings", {}) for r in results]
        assert sorted(committed) == [False] * (runs - 1) + [True], committed
        expected = expected_gold(twin)
        problems = daily_avg_differences(_rows(store_settings, "gold", "daily_patient_avg"), expected)
        problems += device_count_differences(_rows(store_settings, "gold", "device_counts"), expected)
        assert not problems, problems
    # Every table lies on the store, and no run left a lock behind (_locks).
    assert store_settings.root.folders() == ["_checkpoints", "_schemas", "bronze", "gold", "landing",
                                             "silver"]
    assert not Path(str(store_settings.root.path)).exists()
    # And every invariant lakehouse verify checks holds there, gold recomputed on the engine too.
    report = check_all(LakehouseResource.from_settings(store_settings))
    assert report.ok and not [r.name for r in report.results if r.skipped], report.summary()
