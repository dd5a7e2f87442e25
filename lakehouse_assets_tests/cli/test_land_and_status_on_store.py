"""``lakehouse land`` and ``lakehouse status`` with the lakehouse root on S3-API object storage
(the tests' s3proxy): files land as objects, numbering continues, and status lists them.

Objects are read back through obstore, not through the project's locations: an independent
reader, which also shows each object's ETag (Spark's S3A refuses objects without one).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import obstore
from obstore.store import S3Store

from lakehouse_assets.location import ObjectStore, locate
from lakehouse_assets.simulator import read_manifest
from lakehouse_assets_tests.cli.helpers import Runner
from lakehouse_assets_tests.s3_server import S3Server


def objects(server: S3Server, bucket: str, prefix: str) -> dict[str, dict[str, object]]:
    """Key below ``prefix`` -> its metadata (size, ETag), as the S3 API lists it."""
    store = S3Store(bucket, config={"endpoint": server.endpoint_url, "region": "us-east-1"},
                    client_options={"allow_http": True})
    return {meta["path"].removeprefix(prefix): dict(meta)
            for page in obstore.list(store, prefix) for meta in page}


def test_land_and_status_on_the_store(lakehouse: Runner, on_s3: S3Server, tmp_path: Path) -> None:
    bucket = on_s3.bucket(f"land-{uuid.uuid4().hex[:12]}")
    root = f"s3a://{bucket}/lake"
    before = sorted(tmp_path.iterdir())

    first = lakehouse("land", "--files", "2", "--records", "10", "--changes", "1", "--json",
                      root_env=root, cwd=tmp_path)  # type: ignore[arg-type]
    assert first.code == 0, str(first)
    report = json.loads(first.stdout)
    assert report["recordings_dir"] == f"{root}/landing/recordings"
    assert [f["path"] for f in report["files"]] == [f"{root}/landing/recordings/recordings-00000{i}.json"
                                                    for i in (1, 2)]
    landed = objects(on_s3, bucket, "lake/landing/")
    # The landers' locks are released; pyarrow leaves the empty folder marker of _locks.
    assert sorted(key for key in landed if not key.startswith("_locks")) == [
        "patient_changes/patient_changes-000001.json", "patients/patients.csv", "recordings/_manifest.json",
        "recordings/recordings-000001.json", "recordings/recordings-000002.json"]
    assert not [key for key in landed if key.endswith(".lock")]
    assert all(str(meta["e_tag"]).strip('"') for meta in landed.values())
    store = S3Store(bucket, config={"endpoint": on_s3.endpoint_url, "region": "us-east-1"},
                    client_options={"allow_http": True})
    text = bytes(obstore.get(store, "lake/landing/recordings/recordings-000002.json").bytes()).decode()
    assert len(text.splitlines()) == 10
    # Nothing landed on the local disk under a name made of the URI.
    assert sorted(tmp_path.iterdir()) == before

    # A second landing continues the numbering (the manifest on the store remembers it).
    second = lakehouse("land", "--files", "1", "--records", "10", "--json", root_env=root)  # type: ignore[arg-type]
    assert second.code == 0, str(second)
    assert [f["index"] for f in json.loads(second.stdout)["files"]] == [3]
    manifest = read_manifest(locate(f"{root}/landing", ObjectStore(on_s3.endpoint_url, "us-east-1")))
    assert manifest is not None and [f.index for f in manifest.files] == [1, 2, 3]

    status = lakehouse("status", "--json", root_env=root)  # type: ignore[arg-type]
    assert status.code == 0, str(status)
    sources = {s["source"]: s for s in json.loads(status.stdout)["landing"]}
    assert {name: (s["files"], s["not_ingested"]) for name, s in sources.items()} == {
        "patient_changes": (1, 1), "patients": (1, 1), "recordings": (3, 3)}
    assert sources["recordings"]["path"] == f"{root}/landing/recordings"
    assert sources["recordings"]["not_ingested_files"] == [f"recordings-00000{i}.json" for i in (1, 2, 3)]
    shown = lakehouse("status", root_env=root)  # type: ignore[arg-type]
    assert shown.code == 0, str(shown)
    assert next(line for line in shown.stdout.splitlines() if line.startswith("recordings ")).split() \
        == ["recordings", "3", "3", "-"]
