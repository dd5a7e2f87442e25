"""``make run-on-store``'s server: ``python -m lakehouse_assets_tests.s3_server`` serves a bucket
on loopback while a command runs with the AWS variables naming it, and stops with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lakehouse_assets.engine.probe import listening
from lakehouse_assets_tests.ports import free_port

# What the command does: writes and reads a key under the lakehouse's root, whose store its
# settings find from the AWS variables alone (as `make run`'s commands do).
_CHILD = """
import os, sys
from lakehouse_assets.settings import LakehouseSettings
key = LakehouseSettings.from_env({**os.environ, "LAKEHOUSE_ROOT": "s3a://demo/lakehouse"}).root / "hello.txt"
key.write_text("hello from the store")
print("read back:", key.read_text())
sys.exit(3)
"""


def test_the_command_reaches_the_bucket_and_the_server_stops_with_it(tmp_path: Path) -> None:
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "lakehouse_assets_tests.s3_server", "--base", str(tmp_path / "buckets"),
         "--bucket", "demo", "--port", str(port), "--", sys.executable, "-c", _CHILD],
        capture_output=True, text=True, timeout=120)

    assert done.returncode == 3, done.stderr  # the command's own exit code
    assert f"export AWS_ENDPOINT_URL=http://127.0.0.1:{port}" in done.stdout
    assert "read back: hello from the store" in done.stdout
    # The key is a file of the bucket's folder, kept after the server stopped.
    assert (tmp_path / "buckets" / "demo" / "lakehouse" / "hello.txt").read_text() == "hello from the store"
    assert not listening(port)
