"""Files landed in the landing folder reach gold by themselves, as ``make run`` meets them.

The real ``dagster dev`` (webserver, daemon, code server) runs over a temporary home and
lakehouse through the script ``make run`` uses, started as ``make run &`` starts it, with the
sensors as shipped. As ``make run`` does, the recordings and the patients lookup have landed
before it starts: the first run the sensors launch builds the lookup along and carries the
recordings to gold. Then a second batch lands while it runs. Nothing is launched by the test.
Gold is checked against an independent computation from the landed files after each batch,
and SIGTERM stops every process it started, at once.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakehouse_assets.simulator import land
from lakehouse_assets_tests.e2e.dagster_dev import DagsterDeployment
from lakehouse_assets_tests.e2e.reference import expected_gold, wait_for_gold

pytestmark = pytest.mark.slow

# Small files keep each run short; a file per day (365 a year) gives gold several days.
RECORDS_PER_FILE = 500
FILES_PER_YEAR = 365
SEED = 5
BATCHES = (2, 1)  # files landed per batch
# Bounded wait per batch: each batch takes three or four queued runs, each with its own JVM.
BATCH_TIMEOUT_SECONDS = 8 * 60
IDLE_TIMEOUT_SECONDS = 3 * 60
# make run passes SIGTERM on at once: dagster dev stops its services in seconds, not by a kill.
STOP_TIMEOUT_SECONDS = 25
SENSOR_NAMES = {"landing_recordings_sensor", "landing_patients_sensor", "lakehouse_automation_sensor"}


@pytest.fixture
def dagster(tmp_path: Path) -> Iterator[DagsterDeployment]:
    with DagsterDeployment(
        home=tmp_path / "dagster_home", root=tmp_path / "lakehouse", log_dir=tmp_path, sensor_interval_seconds=5
    ) as deployment:
        yield deployment


def test_landed_files_reach_gold_through_sensors(dagster: DagsterDeployment, capsys: pytest.CaptureFixture[str]) -> None:
    """A first batch landed before start and a second while it runs; after each,
    gold/daily_patient_avg and gold/device_counts must equal what the landed files say, and
    every run (all started by the sensors) must succeed; the first run reaches gold. Then
    SIGTERM must stop every process the deployment started."""
    landing = dagster.root / "landing"
    started = time.monotonic()
    latencies = []
    for batch, files in enumerate(BATCHES):
        land(landing, files=files, records_per_file=RECORDS_PER_FILE, bad_rate=0.0, seed=SEED, files_per_year=FILES_PER_YEAR)
        if batch == 0:
            dagster.start_dev(as_make_run=True)
            dagster.wait_until_loaded()
            startup = time.monotonic() - started
        expected = expected_gold(landing)
        latencies.append(
            wait_for_gold(dagster.root, expected, timeout=BATCH_TIMEOUT_SECONDS, on_poll=dagster.raise_on_failed_runs)
        )
        # Gold is committed before its run ends (the asset checks run after it): let every
        # run finish, and succeed, before the next batch and before shutting down.
        runs = dagster.wait_until_idle(timeout=IDLE_TIMEOUT_SECONDS)
        if batch == 0:
            first = min(runs, key=lambda run: run["creationTime"])
            built = {"/".join(key["path"]) for key in first["assetSelection"] or []}
            assert first["status"] == "SUCCESS" and {"gold/daily_patient_avg", "gold/device_counts"} <= built, \
                f"the first run did not reach gold: {_describe(first)}"

    not_from_sensors = [run["runId"] for run in runs if _tag(run, "dagster/sensor_name") not in SENSOR_NAMES]
    assert not not_from_sensors, f"runs not requested by the project's sensors: {not_from_sensors}"
    # The landing sensors' runs carry the files to gold; automation may add none.
    assert {"landing_recordings_sensor", "landing_patients_sensor"} <= {_tag(run, "dagster/sensor_name") for run in runs}

    report = dagster.stop(timeout=STOP_TIMEOUT_SECONDS, sig=signal.SIGTERM)
    assert report.clean, report.describe()
    # Shown even when the test passes: the benchmark issue compares these numbers.
    with capsys.disabled():
        print(
            f"\n[e2e land->gold] startup {startup:.0f}s; "
            + "; ".join(f"batch {i} ({n} x {RECORDS_PER_FILE} records) {s:.0f}s" for i, (n, s) in enumerate(zip(BATCHES, latencies, strict=True), 1))
            + f"; {len(runs)} runs; shutdown {report.seconds:.0f}s"
        )
        for run in reversed(runs):
            print(f"[e2e land->gold]   {_describe(run)}")


def _tag(run: dict, key: str) -> str | None:
    return next((tag["value"] for tag in run["tags"] if tag["key"] == key), None)


def _describe(run: dict) -> str:
    """One run's timing: queued (waiting for the previous run) and running seconds."""
    assets = ", ".join("/".join(key["path"]) for key in run["assetSelection"] or [])
    queued = run["startTime"] - run["creationTime"]
    running = run["endTime"] - run["startTime"]
    return f"{_tag(run, 'dagster/sensor_name')}: {assets}: queued {queued:.0f}s, ran {running:.0f}s"
