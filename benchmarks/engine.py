"""The warm Spark Connect engine the benchmarks attach runs to, and what can be seen of it.

:class:`WarmEngine` starts the product's managed engine (``lakehouse engine start``) on a free
loopback port with a lakehouse root of its own, once per invocation and before any timed run;
runs of other lakehouse roots reach it by a URL that carries its token (as
``scripts/test_on_engine.sh`` does). It is stopped with ``stop_engine`` when the invocation
ends, also on Ctrl-C or failure (use it as a context manager, or call :meth:`WarmEngine.stop`).

:func:`snapshot` says what the engine holds right now: memory of its JVM and of its Python
workers (RSS and PSS, as :mod:`benchmarks.measure` measures runs), its JVM's threads, its
live processes, the files in its temp folder, its sessions as its log tells them.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.contenders import PYTHON, base_env, product_dir
from benchmarks.measure import process_kind, pss_bytes, rss_bytes

MIB = 2**20
#: How long ``lakehouse engine start`` may take (it waits until a first job ran): 15-20 s on an
#: idle 2-core machine, much more on a busy one.
START_TIMEOUT_SECONDS = 300
#: Ports other engines on this machine use by default (the product's and its test pass's).
RESERVED_PORTS = frozenset({15002, 15012})

#: The JVM names a running streaming query's thread "stream execution thread for ..."; Linux
#: keeps the first 15 characters of a thread's name.
STREAM_THREAD_PREFIX = "stream executio"
#: How many of the JVM's most common thread names a snapshot lists.
TOP_THREAD_NAMES = 8
_SESSION_SEEN = re.compile(r"SessionHolder: Session with userId: .* and sessionId: ([0-9a-f-]{36})")
_SESSION_CLOSED = re.compile(r"SessionHolder: Closing session with userId: .* and sessionId: ([0-9a-f-]{36})")
_HEAP_USED = re.compile(r"used (\d+)K")


class EngineFailed(RuntimeError):
    """The warm engine could not be started (its log says why)."""


def free_port() -> int:
    """A loopback TCP port nothing listens on now, never one of :data:`RESERVED_PORTS`."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in RESERVED_PORTS:
            return port


@dataclass
class WarmEngine:
    """One managed Spark Connect engine under ``root`` (its ``_engine/`` holds pid, token, log).

    ``env`` is added to the engine's environment; ``temp_dir`` (optional) becomes its only temp
    folder (Spark's local dirs, the JVM's and Python's temp dirs), so its files can be counted.
    """

    root: Path
    port: int = field(default_factory=free_port)
    env: Mapping[str, str] = field(default_factory=dict)
    temp_dir: Path | None = None
    start_seconds: float | None = None
    _token: str | None = None

    def __post_init__(self) -> None:
        self.session_log = SessionLog(self.log_path)

    def settings(self) -> Any:
        """The product's settings naming this engine (for its server functions)."""
        from lakehouse_assets.location import locate
        from lakehouse_assets.settings import LakehouseSettings

        return LakehouseSettings(root=locate(self.root.resolve()), engine_port=self.port)

    @property
    def folder(self) -> Path:
        return self.root / "_engine"

    @property
    def log_path(self) -> Path:
        return self.folder / "engine.log"

    def start(self) -> float:
        """Start it (``lakehouse engine start``, in this venv, with the product's code on the
        path of the engine's Python workers too) and return the seconds until it answered."""
        self.root.mkdir(parents=True, exist_ok=True)
        env = base_env(LAKEHOUSE_ENGINE_PORT=str(self.port), **dict(self.env))
        if self.temp_dir is not None:
            env.update(temp_dir_env(self.temp_dir))
        started = time.monotonic()
        try:
            done = subprocess.run(
                [PYTHON, "-m", "lakehouse_assets.cli", "--root", str(self.root), "engine", "start",
                 "--timeout", str(START_TIMEOUT_SECONDS)],
                env=env, cwd=product_dir(), capture_output=True, text=True, timeout=START_TIMEOUT_SECONDS + 60,
            )
        except subprocess.TimeoutExpired as exc:
            self.stop()
            raise EngineFailed(f"`lakehouse engine start` did not return within {exc.timeout:.0f} s") from exc
        if done.returncode != 0:
            self.stop()
            raise EngineFailed(f"`lakehouse engine start` exited {done.returncode}: {(done.stderr or done.stdout)[-2_000:]}")
        self.start_seconds = time.monotonic() - started
        self._token = (self.folder / "token").read_text().strip()
        return self.start_seconds

    def url(self) -> str:
        """The URL a run of another lakehouse root attaches with: the token in it (written
        ``localhost``: gRPC sends a token without TLS only there)."""
        if self._token is None:
            raise EngineFailed("the engine is not started")
        return f"sc://localhost:{self.port}/;token={self._token}"

    def pids(self) -> list[int]:
        """Every live process of the engine: its server and the Python workers it started."""
        from lakehouse_assets.engine.server import engine_processes

        return engine_processes(self.settings())

    def answering(self) -> bool:
        from lakehouse_assets.engine.server import engine_status

        return engine_status(self.settings()).answering

    def stop(self) -> bool:
        """Stop it and every process it started; True when it was running."""
        from lakehouse_assets.engine.server import stop_engine

        self._token = None
        return stop_engine(self.settings())

    def __enter__(self) -> WarmEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def temp_dir_env(folder: Path) -> dict[str, str]:
    """Environment that sends every temp file of a Spark server into ``folder``: Spark's local
    dirs (shuffle, blocks, artifacts), the JVM's ``java.io.tmpdir`` and Python's ``TMPDIR``."""
    folder.mkdir(parents=True, exist_ok=True)
    return {"SPARK_LOCAL_DIRS": str(folder), "TMPDIR": str(folder), "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={folder}"}


# -- what the engine holds ------------------------------------------------------------------------


def snapshot(engine: WarmEngine, *, heap: bool = False, full_gc: bool = False) -> dict[str, Any]:
    """The engine right now: memory (MiB) of its JVM and its Python workers, the JVM's threads
    and live streaming queries, its processes, temp files and log, its sessions by its log;
    with ``heap``, the JVM's used heap (``jcmd``), after a full GC with ``full_gc``."""
    pids = engine.pids()
    jvm = next((p for p in pids if process_kind(p) == "java"), None)
    workers = [p for p in pids if p != jvm]
    out: dict[str, Any] = {
        "processes": len(pids),
        "python_workers": len(workers),
        "jvm_rss_mib": _mib(rss_bytes(jvm)) if jvm else None,
        "jvm_pss_mib": _mib(pss_bytes(jvm)) if jvm else None,
        "workers_rss_mib": _mib(sum(rss_bytes(p) for p in workers)),
        "workers_pss_mib": _mib(sum(pss_bytes(p) for p in workers)),
    }
    out["total_rss_mib"] = round((out["jvm_rss_mib"] or 0) + out["workers_rss_mib"], 1)
    out["total_pss_mib"] = round((out["jvm_pss_mib"] or 0) + out["workers_pss_mib"], 1)
    out["python_worker_modules"] = dict(Counter(worker_module(p) for p in workers).most_common())
    if jvm is not None:
        names = thread_names(jvm)
        out["jvm_threads"] = len(names)
        out["streaming_query_threads"] = sum(1 for n in names if n.startswith(STREAM_THREAD_PREFIX))
        out["jvm_thread_names"] = dict(Counter(names).most_common(TOP_THREAD_NAMES))
        if heap:
            out["heap_used_mib"] = heap_used_mib(jvm, full_gc=full_gc)
            out["heap_after_full_gc"] = full_gc
    if engine.temp_dir is not None:
        out["temp_files"], out["temp_mib"] = count_files(engine.temp_dir)
    out["log_mib"] = _mib(_size(engine.log_path))
    out.update(engine.session_log.counts())
    return out


def worker_module(pid: int) -> str:
    """What a Python process of the engine runs: the worker module PySpark's daemon serves
    (``python -m pyspark.daemon <module>``), else its last argument."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            args = [a.decode(errors="replace") for a in handle.read().split(b"\0") if a]
    except OSError:
        return "gone"
    return args[-1].rsplit(".", 1)[-1] if args else "?"


def thread_names(pid: int) -> list[str]:
    """The (15-character) names of a process's threads, from /proc."""
    names = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return names
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as handle:
                names.append(handle.read().strip())
        except OSError:
            continue
    return names


def heap_used_mib(pid: int, *, full_gc: bool = False) -> float | None:
    """The JVM's used heap from ``jcmd <pid> GC.heap_info`` (after ``GC.run`` with
    ``full_gc``); None where the JDK's jcmd is not installed or does not answer."""
    jcmd = _jcmd()
    if jcmd is None:
        return None
    try:
        if full_gc:
            subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=60, check=True)
        out = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = _HEAP_USED.search(out)
    return None if match is None else round(int(match.group(1)) / 1024, 1)


def _jcmd() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "jcmd", os.X_OK):
        return str(Path(java_home) / "bin" / "jcmd")
    found = shutil.which("jcmd")
    if found:
        return found
    java = shutil.which("java")
    if java:  # Debian's alternatives: /usr/bin/java -> .../bin/java, jcmd beside it in a full JDK
        candidate = Path(os.path.realpath(java)).with_name("jcmd")
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


class SessionLog:
    """Sessions the engine's log shows, read on from where the last look stopped: the server
    logs at INFO, so every session's requests and its closing appear there."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.seen: set[str] = set()
        self.closed: set[str] = set()

    def counts(self) -> dict[str, int]:
        """``sessions_seen`` (any request), ``sessions_closed`` (released by their client or
        expired), ``sessions_open`` (seen and not closed)."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except OSError:
            chunk = b""
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written is read next time
        self.offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            if "SessionHolder" not in line:
                continue
            if (match := _SESSION_CLOSED.search(line)) is not None:
                self.closed.add(match.group(1))
            elif (match := _SESSION_SEEN.search(line)) is not None:
                self.seen.add(match.group(1))
        seen = self.seen | self.closed
        return {"sessions_seen": len(seen), "sessions_closed": len(self.closed), "sessions_open": len(seen - self.closed)}


def count_files(folder: Path) -> tuple[int, float]:
    """Files under ``folder`` and their size in MiB."""
    files = 0
    size = 0
    for current, _, names in os.walk(folder):
        for name in names:
            files += 1
            size += _size(Path(current) / name)
    return files, _mib(size)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mib(value: int) -> float:
    return round(value / MIB, 1)
