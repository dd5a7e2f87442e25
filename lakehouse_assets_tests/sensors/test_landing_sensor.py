"""The landing sensor, evaluated tick by tick with Dagster's sensor context."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_assets.sensors.landing import (
    SETTLE_SECONDS,
    TAG_FILE_COUNT,
    TAG_FILES,
    LandingCursor,
    landing_sensor,
)
from lakehouse_assets.settings import LakehouseSettings

TARGET = dg.AssetKey(["bronze", "recordings"])


@pytest.fixture
def landing(settings: LakehouseSettings) -> Path:
    folder = settings.landing_path("recordings")
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def sensor() -> dg.SensorDefinition:
    return landing_sensor(source="recordings", targets=[TARGET], minimum_interval_seconds=30)


def land(folder: Path, name: str, text: str = '{"a": 1}\n', *, age_seconds: float = 60.0) -> Path:
    path = folder / name
    path.write_text(text)
    settled = time.time() - age_seconds
    os.utime(path, (settled, settled))
    return path


DOWNSTREAM = dg.AssetKey(["silver", "recordings_enriched"])
UNRELATED = dg.AssetKey(["silver", "patients"])
LANDING = dg.AssetKey(["landing", "recordings"])  # external: files, never a table


def _materializable(key: dg.AssetKey, deps: list[dg.AssetKey] | None = None) -> dg.AssetsDefinition:
    @dg.asset(key=key, deps=deps or [])
    def _table() -> None: ...

    return _table


def tick(sensor: dg.SensorDefinition, cursor: str | None) -> tuple[list[dg.RunRequest], str | None, str | None]:
    definitions = dg.Definitions(
        assets=[_materializable(TARGET, deps=[LANDING]), _materializable(UNRELATED),
                _materializable(DOWNSTREAM, deps=[TARGET, UNRELATED]), dg.AssetSpec(LANDING)],
        sensors=[sensor],
    )
    context = dg.build_sensor_context(cursor=cursor, definitions=definitions)
    result = sensor.evaluate_tick(context)
    skip = result.skip_message
    return list(result.run_requests or []), result.cursor if result.cursor is not None else cursor, skip


def test_first_tick_requests_a_run_and_remembers_the_files(sensor, landing):
    land(landing, "r1.json")
    land(landing, "r2.json")

    requests, cursor, _ = tick(sensor, None)

    assert len(requests) == 1
    assert requests[0].tags[TAG_FILE_COUNT] == "2"
    assert "r1.json" in requests[0].tags[TAG_FILES] and "r2.json" in requests[0].tags[TAG_FILES]
    assert set(LandingCursor.parse(cursor).announced) == {"r1.json", "r2.json"}


def test_one_run_carries_new_files_through_everything_downstream(sensor, landing):
    land(landing, "r1.json")

    requests, _, _ = tick(sensor, None)

    # Bronze and all below it, nothing else, even though the downstream table's other
    # upstream has no table yet: the run skips it with its reason (nothing_to_read).
    assert set(requests[0].asset_selection) == {TARGET, DOWNSTREAM}


def test_a_tick_without_new_files_skips_with_a_reason(sensor, landing):
    land(landing, "r1.json")
    _, cursor, _ = tick(sensor, None)

    requests, _, skip = tick(sensor, cursor)

    assert requests == []
    assert skip is not None and "No new files" in skip


def test_a_new_file_requests_again_and_names_only_itself(sensor, landing):
    land(landing, "r1.json")
    _, cursor, _ = tick(sensor, None)
    land(landing, "r2.json")

    requests, cursor, _ = tick(sensor, cursor)

    assert len(requests) == 1
    assert requests[0].tags[TAG_FILES] == "r2.json"
    assert requests[0].tags[TAG_FILE_COUNT] == "1"


def test_a_relanded_file_with_new_content_triggers_again(sensor, landing):
    land(landing, "r1.json", '{"a": 1}\n', age_seconds=120)
    _, cursor, _ = tick(sensor, None)
    land(landing, "r1.json", '{"a": 1}\n{"a": 2}\n', age_seconds=60)

    requests, _, _ = tick(sensor, cursor)

    assert len(requests) == 1 and requests[0].tags[TAG_FILES] == "r1.json"


def test_temporary_and_hidden_files_are_not_data(sensor, landing):
    for name in ("r1.json.tmp", "r2.json.partial", ".r3.json", "_manifest.json"):
        land(landing, name)

    requests, _, skip = tick(sensor, None)

    assert requests == [] and skip is not None


def test_a_file_still_growing_waits_until_its_size_holds(sensor, landing):
    path = land(landing, "r1.json", '{"a": 1}\n', age_seconds=0)

    requests, cursor, skip = tick(sensor, None)
    assert requests == [] and "still being written" in skip

    with path.open("a") as handle:  # the writer appends more: still growing
        handle.write('{"a": 2}\n')
    requests, cursor, _ = tick(sensor, cursor)
    assert requests == []

    requests, cursor, _ = tick(sensor, cursor)  # unchanged since the last look: settled
    assert len(requests) == 1 and requests[0].tags[TAG_FILES] == "r1.json"
    assert SETTLE_SECONDS > 0


def test_a_burst_of_500_files_gives_one_request(sensor, landing):
    for index in range(500):
        land(landing, f"r{index:04d}.json")

    requests, cursor, _ = tick(sensor, None)

    assert len(requests) == 1
    assert requests[0].tags[TAG_FILE_COUNT] == "500"
    assert "and 480 more" in requests[0].tags[TAG_FILES]
    assert len(json.loads(cursor)["announced"]) == 500
    assert tick(sensor, cursor)[0] == []


def test_a_missing_landing_folder_skips(sensor, settings):
    requests, _, skip = tick(sensor, None)
    assert requests == [] and str(settings.landing_path("recordings")) in skip
