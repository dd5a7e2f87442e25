"""The landing sensor, evaluated tick by tick with Dagster's sensor context."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakehouse_assets.resource import LAKEHOUSE_RESOURCE, LakehouseResource
from lakehouse_assets.sensors.landing import (
    SETTLE_SECONDS,
    TAG_BUILT_ALONG,
    TAG_FILE_COUNT,
    TAG_FILES,
    LandingCursor,
    landing_sensor,
    landing_sensors,
)
from lakehouse_assets.settings import LakehouseSettings

TARGET = dg.AssetKey(["bronze", "recordings"])


@pytest.fixture
def landing(settings: LakehouseSettings) -> Path:
    folder = Path(settings.landing_path("recordings"))
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


def tick(sensor: dg.SensorDefinition, cursor: str | None,
         assets: list | None = None) -> tuple[list[dg.RunRequest], str | None, str | None]:
    definitions = dg.Definitions(
        assets=assets or [_materializable(TARGET, deps=[LANDING]), _materializable(UNRELATED),
                          _materializable(DOWNSTREAM, deps=[TARGET, UNRELATED]), dg.AssetSpec(LANDING)],
        sensors=[sensor],
    )
    with dg.build_sensor_context(cursor=cursor, definitions=definitions,
                                 resources={LAKEHOUSE_RESOURCE: LakehouseResource.from_settings(LakehouseSettings.from_env())}) as context:
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


def test_a_lookup_from_another_folder_never_built_is_built_along(settings, landing):
    # The downstream table joins a lookup read from landing/patients: on a fresh lakehouse
    # where both folders hold files, the first run builds it too, so it reaches the bottom.
    patients_landing = dg.AssetKey(["landing", "patients"])
    assets = [_materializable(TARGET, deps=[LANDING]), _materializable(UNRELATED, deps=[patients_landing]),
              _materializable(DOWNSTREAM, deps=[TARGET, UNRELATED]), dg.AssetSpec(LANDING),
              dg.AssetSpec(patients_landing)]
    sensors = {s.name: s for s in landing_sensors(assets, minimum_interval_seconds=30)}
    recordings = sensors["landing_recordings_sensor"]
    land(landing, "r1.json")

    requests, cursor, _ = tick(recordings, None, assets)
    assert set(requests[0].asset_selection) == {TARGET, DOWNSTREAM}  # nothing landed for the lookup

    patients = Path(settings.landing_path("patients"))
    patients.mkdir(parents=True)
    land(patients, "patients.csv", "mrn,name\n1,Ada\n")
    land(landing, "r2.json")
    requests, cursor, _ = tick(recordings, cursor, assets)
    assert set(requests[0].asset_selection) == {TARGET, UNRELATED, DOWNSTREAM}
    assert requests[0].tags[TAG_BUILT_ALONG] == "silver/patients"

    # Once the lookup is a table, its own sensor keeps it: the folder's runs are their own again.
    write_deltalake(str(settings.table_path("silver", "patients")), pa.table({"mrn": [1], "name": ["Ada"]}))
    land(landing, "r3.json")
    requests, _, _ = tick(recordings, cursor, assets)
    assert set(requests[0].asset_selection) == {TARGET, DOWNSTREAM} and TAG_BUILT_ALONG not in requests[0].tags
    # The lookup's sensor builds what its table feeds, never-built bronze included.
    requests, _, _ = tick(sensors["landing_patients_sensor"], None, assets)
    assert set(requests[0].asset_selection) == {UNRELATED, TARGET, DOWNSTREAM}
    assert requests[0].tags[TAG_BUILT_ALONG] == "bronze/recordings"


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
