"""Fixtures of the storage tests: a fresh folder on a local disk or on the tests' S3 server."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from lakehouse_assets.location import Location, ObjectStore, locate
from lakehouse_assets_tests.s3_server import S3Server

#: A folder of the lakehouse, on the disk or on the server (reached through its store).
Folder = Callable[[str], Location]


@pytest.fixture(params=["disk", "store"])
def folder(request: pytest.FixtureRequest, tmp_path: Path) -> Folder:
    """A fresh folder under a temporary folder, or under a new bucket of the server."""
    if request.param == "disk":
        return lambda name: locate(tmp_path / name)
    folder: Folder = request.getfixturevalue("store_folder")
    return folder


@pytest.fixture
def store_folder(on_s3: S3Server) -> Folder:
    """A fresh folder under a new bucket of the server."""
    bucket, store = on_s3.bucket(f"t-{uuid.uuid4().hex[:12]}"), ObjectStore(on_s3.endpoint_url, "us-east-1")
    return lambda name: locate(f"s3a://{bucket}/lake/{name}", store)
