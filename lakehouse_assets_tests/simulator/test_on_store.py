"""The lander with its landing root on S3-API object storage (the tests' s3proxy): landers take
turns through the leased lock, numbering lives in the manifest there, and the files are the
same bytes a local landing gets."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from lakehouse_assets.location import Location, ObjectStore, locate
from lakehouse_assets.simulator import LandingResult, LandingStateError, land, read_manifest
from lakehouse_assets_tests.s3_server import S3Server


@pytest.fixture
def store_landing(on_s3: S3Server) -> Location:
    """An empty landing folder under a new bucket of the server."""
    return locate(f"s3a://{on_s3.bucket(f'sim-{uuid.uuid4().hex[:12]}')}/landing",
                  ObjectStore(on_s3.endpoint_url, "us-east-1"))


def test_landers_on_the_store_take_turns_and_land_what_a_disk_gets(store_landing: Location, tmp_path: Path) -> None:
    results: list[LandingResult] = []
    landers = [threading.Thread(target=lambda: results.append(land(store_landing, files=2, records_per_file=10, seed=8)))
               for _ in range(2)]
    for lander in landers:
        lander.start()
    for lander in landers:
        lander.join()

    assert sorted(f.index for r in results for f in r.files) == [1, 2, 3, 4]
    manifest = read_manifest(store_landing)
    assert manifest is not None and [f.index for f in manifest.files] == [1, 2, 3, 4]
    assert all(isinstance(path, Location) for r in results for path in r.paths)
    on_disk = land(tmp_path / "landing", files=4, records_per_file=10, seed=8)
    assert [(store_landing / "recordings" / p.name).read_text() for p in on_disk.paths] \
        == [p.read_text() for p in on_disk.paths]
    assert (store_landing / "patients" / "patients.csv").read_text() == on_disk.patients_path.read_text()
    # The data set on the store is checked as on a disk.
    with pytest.raises(LandingStateError, match="seed=8"):
        land(store_landing, files=1, records_per_file=10, seed=9)
