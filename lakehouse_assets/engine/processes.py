"""The engine's processes: the Connect server and everything it started, found by the marker
in their environment, ended by signal, and gone only when their last thread is.

PySpark's daemon moves itself and its workers to a process group of their own, so signalling
the server's group is not enough: every process the server starts inherits the marker
(``LAKEHOUSE_ENGINE_DIR=<the _engine folder>``), and ending the engine ends each process that
carries it, whatever its group or parent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from lakehouse_assets.engine.files import EngineFiles

# The engine's driver program (spark-submit's primary resource): it starts Spark Connect's server.
DRIVER_SCRIPT = Path(__file__).with_name("driver.py")
# After the server has gone, how long its leftover processes get between SIGTERM and SIGKILL.
_LEFTOVER_GRACE_SECONDS = 5.0

# Servers this process launched, so that stopping them also reaps them (no zombies).
_launched: dict[int, subprocess.Popen[bytes]] = {}


def remember_launched(process: subprocess.Popen[bytes]) -> None:
    """Record a server this process started, so that ending it also reaps it."""
    _launched[process.pid] = process


def is_engine_process(pid: int, files: EngineFiles) -> bool:
    """The live engine JVM started with this lakehouse's settings file, not whatever
    program got the pid since."""
    if not _alive(pid):
        return False
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(DRIVER_SCRIPT).encode() in arguments and str(files.properties).encode() in arguments


def end_engine(pid: int | None, files: EngineFiles, *, timeout_seconds: float) -> None:
    """SIGTERM the server's process group (SIGKILL after ``timeout_seconds``), then every
    process left that carries the engine's marker."""
    if pid is not None:
        _signal(pid, signal.SIGTERM, os.killpg)  # started in a session of its own: group id = pid
        if not _wait_gone([pid], timeout_seconds):
            _signal(pid, signal.SIGKILL, os.killpg)
            _wait_gone([pid], 5)
    end_leftovers(files)


def end_leftovers(files: EngineFiles) -> None:
    """End every process carrying the engine's marker: SIGTERM, then SIGKILL."""
    leftovers = marked_processes(files)
    for leftover in leftovers:
        _signal(leftover, signal.SIGTERM)
    if leftovers and not _wait_gone(leftovers, _LEFTOVER_GRACE_SECONDS):
        for leftover in marked_processes(files):
            _signal(leftover, signal.SIGKILL)
        _wait_gone(leftovers, _LEFTOVER_GRACE_SECONDS)


def _signal(pid: int, signum: int, send: Callable[[int, int], None] = os.kill) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        send(pid, signum)


def _wait_gone(pids: list[int], timeout_seconds: float) -> bool:
    deadline = time.monotonic() + timeout_seconds
    while True:
        if not any(_alive(pid) for pid in pids):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    """Alive, or still exiting (reaping it when this process launched it). A JVM's main thread
    turns zombie while its other threads are still exiting and holding its files, the
    listening port among them: it is gone when its last thread is."""
    launched = _launched.get(pid)
    if launched is not None and launched.poll() is not None:
        del _launched[pid]
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X") or threads > 1


def marked_processes(files: EngineFiles) -> list[int]:
    """Every live process carrying the engine's marker."""
    marker = files.marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environment = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if marker in environment.split(b"\0") and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found
