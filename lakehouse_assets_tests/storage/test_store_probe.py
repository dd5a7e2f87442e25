"""The store probe on real S3-API servers started on loopback: s3proxy 4.1.0 (the tests' server,
filesystem-nio2; and its older filesystem backend), which offer what the lakehouse needs, and
s3proxy 2.6.0's filesystem backend, which ignores conditional writes, answers a multi-object
delete with 501, does not list folder markers, and fails pyarrow's reads (a response checksum)."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.location import Location, ObjectStore, locate
from lakehouse_assets.storage.store_probe import WAY_OUT, probe_store
from lakehouse_assets_tests.ports import free_port
from lakehouse_assets_tests.s3_server import LEGACY_SERVER_JARS, S3Server, s3_server


def _root(server: S3Server, prefix: str = "lake") -> tuple[Location, str]:
    bucket = server.bucket(f"probe-{uuid.uuid4().hex[:12]}")
    return locate(f"s3a://{bucket}/{prefix}", ObjectStore(server.endpoint_url, "us-east-1")), bucket


def _objects(server: S3Server, bucket: str) -> dict[str, int]:
    """Every key of the bucket (a folder marker ``k/`` shows as ``k``) with its size."""
    store = S3Store(bucket, config={"endpoint": server.endpoint_url, "region": "us-east-1"},
                    client_options={"allow_http": True})
    return {str(meta["path"]): int(meta["size"]) for batch in obstore.list(store) for meta in batch}


def test_a_local_root_is_not_probed(tmp_path: Path) -> None:
    probe_store(locate(tmp_path / "lake"))
    assert list(tmp_path.iterdir()) == []


def test_a_store_with_what_the_lakehouse_needs_passes_keeps_nothing_and_is_probed_once(on_s3: S3Server) -> None:
    root, bucket = _root(on_s3)
    (root / "bronze" / "kept.json").write_text("{}")
    probe_store(root)
    # Nothing of the probe is left: the lakehouse's own file, and the root's empty folder marker
    # (pyarrow puts the parent's marker when it deletes the probe's folder marker).
    assert _objects(on_s3, bucket) == {"lake/bronze/kept.json": 2, "lake": 0}
    assert not [p for p in (on_s3.base / bucket).rglob("*") if "_probe" in p.name]
    # Once per endpoint and bucket in the process: a bucket gone since is not asked again.
    shutil.rmtree(on_s3.base / bucket)
    probe_store(root)
    probe_store(locate(f"s3a://{bucket}/elsewhere", root.store))


def test_a_root_that_is_a_whole_bucket_keeps_nothing_at_all(on_s3: S3Server) -> None:
    bucket = on_s3.bucket(f"probe-{uuid.uuid4().hex[:12]}")
    probe_store(locate(f"s3a://{bucket}", ObjectStore(on_s3.endpoint_url, "us-east-1")))
    assert _objects(on_s3, bucket) == {}


def test_s3proxy_4_filesystem_backend_offers_it_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with s3_server(tmp_path / "data", backend="filesystem") as server:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        root, bucket = _root(server)
        probe_store(root)
        assert _objects(server, bucket) == {"lake": 0}


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """s3proxy 2.6.0 with its filesystem backend (jars/s3-server-legacy)."""
    with s3_server(tmp_path_factory.mktemp("legacy-s3") / "data", backend="filesystem",
                   server_jars=LEGACY_SERVER_JARS) as server:
        yield server


@pytest.fixture
def on_legacy(legacy: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    for name, value in legacy.environment().items():
        monkeypatch.setenv(name, value)
    return legacy


def test_a_store_without_conditional_writes_is_refused_in_one_line(on_legacy: S3Server) -> None:
    root, bucket = _root(on_legacy)
    with pytest.raises(ConfigurationError) as refused:
        probe_store(root)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"The object store at {on_legacy.endpoint_url} (bucket {bucket}, root {root}) "
                              "lacks what the lakehouse needs: ")
    assert "reads (GET, as pyarrow reads) (OSError: AWS Error INTERNAL_FAILURE during GetObject operation" in message
    assert "conditional create (a second put with If-None-Match: * replaced the object" in message
    assert "conditional replace (a put with If-Match of a version no longer there replaced the object" in message
    assert "multi-object delete (POST ?delete) (POST answered 501 Not Implemented, NotImplemented)" in message
    assert "folder markers (an empty object whose key ends in / is not listed under its own prefix" in message
    assert "server-side copy" not in message and "listings" not in message  # it copies and lists
    assert message.endswith(f"To run the lakehouse there, {WAY_OUT}.")
    assert "could not be removed" not in message
    assert not [key for key in _objects(on_legacy, bucket) if "_probe" in key]
    # The refusal is kept: the store is not asked again.
    started = time.perf_counter()
    with pytest.raises(ConfigurationError) as again:
        probe_store(root)
    assert str(again.value) == message and time.perf_counter() - started < 0.05


def test_a_store_out_of_reach_is_named_and_asked_again_next_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    port = free_port()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "lakehouse-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "lakehouse-test-secret")
    root = locate("s3a://lake/root", ObjectStore(f"http://127.0.0.1:{port}", "us-east-1"))
    with pytest.raises(ConfigurationError, match=rf"^The object store at http://127\.0\.0\.1:{port} \(bucket lake, "
                                                 r"root s3a://lake/root\) cannot be written \(.*\): "
                                                 "check AWS_ENDPOINT_URL, the bucket and the AWS credentials"):
        probe_store(root)
    # A server started there since is asked, and passes.
    with s3_server(tmp_path / "data", port=port) as server:
        server.bucket("lake")
        probe_store(root)
