"""A real S3-API server for the tests: s3proxy 4 with its filesystem-nio2 backend, started on
loopback with the machine's Java (its jar resolved by `make test` into jars/s3-server/lib/).
Each bucket is a folder under the server's base folder. It honours conditional writes
(``If-None-Match: *`` answered 412 when the key exists) as S3 does, which s3proxy 2's
filesystem backend ignored.

``make run-on-store`` serves a bucket with it while ``make run`` runs (:func:`main`).

:data:`LEGACY_SERVER_JARS` holds s3proxy 2 (jars/s3-server-legacy/), whose ``filesystem``
backend is a store the lakehouse cannot work with, for the tests of the store probe."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lakehouse_assets.engine.probe import listening
from lakehouse_assets_tests.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
SERVER_JARS = ROOT / "jars" / "s3-server" / "lib"
LEGACY_SERVER_JARS = ROOT / "jars" / "s3-server-legacy" / "lib"
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
def s3_server(base: Path, port: int | None = None, *, backend: str = "filesystem-nio2",
              server_jars: Path = SERVER_JARS) -> Iterator[S3Server]:
    """s3proxy serving ``base`` on loopback (on ``port``, or a free one) until the block ends, with
    the jclouds ``backend`` and the s3proxy in ``server_jars``."""
    jars = sorted(server_jars.glob("s3proxy-*-jar-with-dependencies.jar"))
    java = shutil.which("java")
    if not jars or java is None:
        raise RuntimeError(f"the tests' S3 server needs Java and its jar in {server_jars}: run `make test`, "
                           f"which resolves it (scripts/install_jars.sh {server_jars.parent})")
    if port is None:
        port = free_port()
    elif listening(port):
        raise RuntimeError(f"port {port} on 127.0.0.1 is taken: stop what holds it, or choose another port")
    base.mkdir(parents=True, exist_ok=True)
    properties = base.parent / f"s3proxy-{port}.properties"
    properties.write_text("\n".join([
        f"s3proxy.endpoint=http://127.0.0.1:{port}",
        "s3proxy.authorization=aws-v2-or-v4",
        f"s3proxy.identity={ACCESS_KEY}",
        f"s3proxy.credential={SECRET_KEY}",
        f"jclouds.provider={backend}",
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


def main(argv: list[str] | None = None) -> int:
    """Serve ``--base`` as an S3-API store on loopback, with the bucket ``--bucket``, while
    COMMAND runs with the AWS variables naming the server; the server stops when COMMAND ends."""
    parser = argparse.ArgumentParser(prog="python -m lakehouse_assets_tests.s3_server", description=main.__doc__)
    parser.add_argument("--base", type=Path, required=True, help="the folder behind the store (kept)")
    parser.add_argument("--bucket", required=True, help="the bucket to create (3 characters or more)")
    parser.add_argument("--port", type=int, default=None, help="the port on 127.0.0.1 (default: a free one)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command to run after --")
    with s3_server(args.base.resolve(), port=args.port) as server:
        server.bucket(args.bucket)
        env = server.environment()
        print(f"S3-API store (s3proxy) at {server.endpoint_url}, bucket {args.bucket!r} in "
              f"{args.base.resolve() / args.bucket}; to reach it from another shell:", flush=True)
        for name, value in env.items():
            print(f"  export {name}={shlex.quote(value)}", flush=True)
        child = subprocess.Popen(command, env={**os.environ, **env})
        # Ctrl-C reaches the command too: wait for it to stop before the store goes.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, lambda *_: child.terminate())
        code = child.wait()
        return 128 - code if code < 0 else code  # killed by a signal: as a shell reports it


if __name__ == "__main__":
    sys.exit(main())
