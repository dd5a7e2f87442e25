"""A real S3-API server for the tests: s3proxy 4 with its filesystem-nio2 backend, started on
loopback with the machine's Java (its jar resolved by `make test` into jars/s3-server/lib/).
Each bucket is a folder under the server's base folder. It honours conditional writes
(``If-None-Match: *`` answered 412 when the key exists) as S3 does, which s3proxy 2's
filesystem backend ignored."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lakehouse_assets.engine.probe import listening
from lakehouse_assets_tests.ports import free_port

SERVER_JARS = Path(__file__).resolve().parents[1] / "jars" / "s3-server" / "lib"
ACCESS_KEY = "lakehouse-test"
SECRET_KEY = "lakehouse-test-secret"
_START_SECONDS = 60


@dataclass(frozen=True)
class S3Server:
    """A running server: its endpoint, its test credentials, and the folder behind it."""

    endpoint_url: str
    base: Path

    def environment(self) -> dict[str, str]:
        """The AWS variables a user of this server sets: its endpoint, the test credentials and
        a region."""
        return {"AWS_ENDPOINT_URL": self.endpoint_url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1"}

    def bucket(self, name: str) -> str:
        """Create the bucket ``name`` (a folder of the filesystem backend); its name back."""
        (self.base / name).mkdir(parents=True, exist_ok=True)
        return name


@contextmanager
def s3_server(base: Path) -> Iterator[S3Server]:
    """s3proxy serving ``base`` on a free loopback port until the block ends."""
    jars = sorted(SERVER_JARS.glob("s3proxy-*-jar-with-dependencies.jar"))
    java = shutil.which("java")
    if not jars or java is None:
        raise RuntimeError(f"the tests' S3 server needs Java and its jar in {SERVER_JARS}: run `make test`, "
                           "which resolves it (scripts/install_jars.sh jars/s3-server)")
    port = free_port()
    base.mkdir(parents=True, exist_ok=True)
    properties = base.parent / f"s3proxy-{port}.properties"
    properties.write_text("\n".join([
        f"s3proxy.endpoint=http://127.0.0.1:{port}",
        "s3proxy.authorization=aws-v2-or-v4",
        f"s3proxy.identity={ACCESS_KEY}",
        f"s3proxy.credential={SECRET_KEY}",
        "jclouds.provider=filesystem-nio2",
        f"jclouds.filesystem.basedir={base}",
    ]) + "\n")
    log = (base.parent / f"s3proxy-{port}.log").open("wb")
    process = subprocess.Popen([java, "-jar", str(jars[-1]), "--properties", str(properties)],
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + _START_SECONDS
        while not listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"s3proxy did not listen on port {port}: see {log.name}")
            time.sleep(0.1)
        yield S3Server(f"http://127.0.0.1:{port}", base)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
