"""The managed local engine of a lakehouse: one Spark Connect server, started, asked after, stopped.

Guarantees:

* At most one managed engine per lakehouse root: ``start_engine`` and ``stop_engine`` hold a
  lock on ``$LAKEHOUSE_ROOT/_engine/``, and ``start_engine`` returns the engine already running
  (same process) when it answers.
* ``start_engine`` returns only once the engine answers an authenticated request and has run
  one job. The engine listens on 127.0.0.1 only and serves only clients that send the token of
  ``_engine/token``; the token is written to owner-only files, never on a command line.
* ``stop_engine`` leaves no process of the engine behind, its Python workers included. PySpark's
  daemon moves itself and its workers to a process group of their own, so signalling the
  server's group is not enough: every process the server starts inherits a marker in its
  environment (``LAKEHOUSE_ENGINE_DIR=<the _engine folder>``), and stop ends each process that
  carries it, whatever its group or parent.
* A recorded pid is trusted only while ``/proc/<pid>/cmdline`` shows the Connect server with
  this lakehouse's settings file, so a pid reused by another program is never signalled.
* Nothing here prints, and nothing here switches the calling process into Spark Connect mode:
  the checks talk to the engine through a session object of their own, not the builder.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from lakehouse_assets.engine.client import EngineAddress
from lakehouse_assets.engine.files import ENGINE_MARKER, EngineFiles, write_private
from lakehouse_assets.errors import EngineStartError
from lakehouse_assets.settings import LakehouseSettings

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
JAVA_INSTALL_HINT = "sudo apt-get install -y openjdk-17-jre-headless"
APP_NAME = "lakehouse_engine"
LOG_TAIL_LINES = 20
# How long one check of an engine may take before it counts as not answering.
PROBE_TIMEOUT_SECONDS = 10.0
# After the server has gone, how long its leftover processes get between SIGTERM and SIGKILL.
_LEFTOVER_GRACE_SECONDS = 5.0
_POLL_SECONDS = 0.25
# Connect clients the server starts with: pyspark and Spark Connect's own variables of a
# caller in Connect mode would make the engine's Python workers believe they are clients too.
_CLIENT_ONLY_ENV = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE",
                    "SPARK_CONNECT_AUTHENTICATE_TOKEN", "LAKEHOUSE_SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")

# Servers this process launched, so that stopping them also reaps them (no zombies).
_launched: dict[int, subprocess.Popen] = {}


@dataclass(frozen=True)
class EngineStatus:
    """What is known of the managed engine of one lakehouse root.

    ``running``: its server process is alive. ``answering``: it served an authenticated
    request just now. ``url`` never holds the token.
    """

    running: bool
    answering: bool
    pid: int | None
    port: int
    url: str
    log: Path
    message: str
    started_at: str | None = None


def engine_status(settings: LakehouseSettings, *, probe_timeout_seconds: float = PROBE_TIMEOUT_SECONDS) -> EngineStatus:
    """Whether the engine recorded under ``settings.root`` runs and answers an authenticated
    request. Fast when nothing listens (a TCP check comes first); changes nothing."""
    files = EngineFiles.of(settings)
    state = files.read_state() or {}
    pid, port = _recorded(state, settings)
    url = _public_url(port)
    started_at = state.get("started_at")
    if pid is None:
        return EngineStatus(False, False, None, port, url, files.log,
                            "no engine is running for this lakehouse; start one with `lakehouse engine start`")
    if not _is_engine_process(pid, files):
        return EngineStatus(False, False, pid, port, url, files.log,
                            f"the engine (pid {pid}) is not running: it was stopped or it crashed "
                            f"(its log is {files.log}); `lakehouse engine start` starts a new one", started_at)
    problem = _probe(port, files.read_token(), timeout_seconds=probe_timeout_seconds)
    if problem:
        doing = "is starting and does not answer yet" if not state.get("ready") else "runs but does not answer"
        return EngineStatus(True, False, pid, port, url, files.log,
                            f"the engine (pid {pid}) {doing} at {url}: {problem}", started_at)
    return EngineStatus(True, True, pid, port, url, files.log,
                        f"the engine (pid {pid}) answers at {url}", started_at)


def start_engine(settings: LakehouseSettings, *, timeout_seconds: float = 180) -> EngineStatus:
    """Start the lakehouse's Spark Connect engine on ``settings.engine_port`` and return once it
    answers and has run a first job; return the running engine instead if one answers.

    The server runs ``spark-submit`` of pip's pyspark on ``settings.spark_master`` with the
    settings of :func:`lakehouse_assets.spark.engine_conf`, in a session of its own, its output
    in ``_engine/engine.log``. Raises :class:`EngineStartError` when Java is missing, the port
    is taken, or the server exits or does not answer within ``timeout_seconds`` (then it is
    stopped, and the error quotes the end of its log).
    """
    files = EngineFiles.of(settings)
    with _engine_lock(files):
        current = engine_status(settings)
        if current.running:
            if current.port != settings.engine_port:
                raise EngineStartError(
                    f"The engine of this lakehouse already runs on port {current.port} (pid {current.pid}), "
                    f"not on port {settings.engine_port}: set LAKEHOUSE_ENGINE_PORT={current.port} to use it, "
                    "or stop it first with `lakehouse engine stop`.")
            if current.answering:
                return current
            raise EngineStartError(
                f"The engine of this lakehouse (pid {current.pid}) runs but does not answer: {current.message}. "
                f"Stop it with `lakehouse engine stop`, then start it again; its log is {files.log}.")
        _end_leftovers(files)  # what a crashed engine left behind (its Python workers)
        _remove_files(files)
        _find_java()
        port = settings.engine_port
        _check_port_free(port)
        token = secrets.token_urlsafe(32)
        write_private(files.token, token + "\n")
        write_private(files.properties, _properties_text(_server_conf(settings, port, token)))
        process = _launch(settings, files)
        started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        state = {"pid": process.pid, "port": port, "started_at": started_at, "ready": False}
        files.write_state(state)  # before it answers, so a stop finds it even if this start dies
        try:
            _wait_until_answering(process, port, token, files, timeout_seconds)
        except BaseException:
            _end_engine(process.pid, files, timeout_seconds=10)
            _remove_files(files)
            raise
        files.write_state({**state, "ready": True})
        return EngineStatus(True, True, process.pid, port, _public_url(port), files.log,
                            f"the engine (pid {process.pid}) answers at {_public_url(port)}", started_at)


def stop_engine(settings: LakehouseSettings, *, timeout_seconds: float = 30) -> bool:
    """Stop the lakehouse's engine: SIGTERM to its server's process group, SIGKILL after
    ``timeout_seconds``, then end whatever it started that is left (Python workers); remove its
    state, token and settings files (the log stays). True when a server was running; stopping
    a stopped engine returns False (and still cleans up after a crashed one)."""
    files = EngineFiles.of(settings)
    with _engine_lock(files):
        state = files.read_state() or {}
        pid, _ = _recorded(state, settings)
        was_running = pid is not None and _is_engine_process(pid, files)
        _end_engine(pid if was_running else None, files, timeout_seconds=timeout_seconds)
        _remove_files(files)
        return was_running


def kill_engine(settings: LakehouseSettings) -> int | None:
    """SIGKILL the engine's server process, as a crash would, and clean nothing up: its
    state and token stay, and its Python workers are left to notice on their own. Returns the
    pid killed, or None when no engine was running. For fault-injection tests."""
    files = EngineFiles.of(settings)
    pid, _ = _recorded(files.read_state() or {}, settings)
    if pid is None or not _is_engine_process(pid, files):
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return pid


def engine_processes(settings: LakehouseSettings) -> list[int]:
    """The pids of every live process of the lakehouse's engine: the server and everything
    it started (PySpark's daemon and Python workers), found by the marker in their environment."""
    return _marked_processes(EngineFiles.of(settings))


# --- starting ---------------------------------------------------------------------------------

def _find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if os.access(java, os.X_OK):
            return str(java)
        raise EngineStartError(
            f"JAVA_HOME is {java_home}, but {java} is not an executable Java: point JAVA_HOME at a Java 17 "
            f"runtime, or unset it and install one with `{JAVA_INSTALL_HINT}`.")
    java = shutil.which("java")
    if java is None:
        raise EngineStartError(
            "Java is not installed, and Spark needs it: install a Java 17 runtime with "
            f"`{JAVA_INSTALL_HINT}` (or set JAVA_HOME to one), then start the engine again.")
    return java


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # The server sets SO_REUSEADDR too: connections of a stopped engine waiting out
        # TIME_WAIT do not keep the port, a listening program does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise EngineStartError(
                f"Port {port} on 127.0.0.1 is taken by another program ({exc.strerror or exc}), so the "
                f"engine cannot listen there: choose another port with LAKEHOUSE_ENGINE_PORT (e.g. "
                f"LAKEHOUSE_ENGINE_PORT={port + 1}), or stop the program using it (`ss -ltnp 'sport = :{port}'` "
                "names it).") from exc


def _server_conf(settings: LakehouseSettings, port: int, token: str) -> dict[str, str]:
    from lakehouse_assets.spark import engine_conf

    conf = {"spark.app.name": APP_NAME, **engine_conf(settings)}
    conf.update({
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.authenticate.token": token,
        "spark.ui.enabled": "false",
    })
    return conf


def _properties_text(conf: Mapping[str, str]) -> str:
    """``conf`` as a Java properties file (what ``spark-submit --properties-file`` reads)."""
    lines = ["# Written by `lakehouse engine start`; holds the engine's token: keep it private."]
    lines += [f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}" for key, value in sorted(conf.items())]
    return "\n".join(lines) + "\n"


def _escape(text: str, *, is_key: bool) -> str:
    out = []
    for i, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "\n\r\t\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[char])
        elif char in "=:#!" and (is_key or i == 0):
            out.append("\\" + char)
        elif char == " " and (is_key or i == 0):
            out.append("\\ ")
        else:
            out.append(char)
    return "".join(out)


def _spark_submit() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    candidates = [Path(_find_spark_home()) / "bin" / "spark-submit", Path(sys.executable).parent / "spark-submit"]
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return candidate
    raise EngineStartError(
        f"spark-submit was not found (looked at {', '.join(map(str, candidates))}): reinstall pyspark "
        "in this environment (`make install`).")


def _engine_env(files: EngineFiles) -> dict[str, str]:
    """The environment of the engine's processes: no client settings, and the marker."""
    env = {key: value for key, value in os.environ.items() if key not in _CLIENT_ONLY_ENV}
    env[ENGINE_MARKER] = str(files.folder)  # what files.marker matches
    return env


def _launch(settings: LakehouseSettings, files: EngineFiles) -> subprocess.Popen:
    spark_submit = _spark_submit()
    env = _engine_env(files)
    env.update({
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_HOME": str(spark_submit.parent.parent),
    })
    command = [str(spark_submit), "--class", SERVER_CLASS, "--master", settings.spark_master,
               "--properties-file", str(files.properties)]
    if files.log.exists():  # keep the previous engine's log (a crash's, say) one start longer
        os.replace(files.log, files.log.with_name(files.log.name + ".1"))
    log = os.open(files.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    try:
        # Its own session: a Ctrl-C in the terminal that started it does not reach it, and
        # it outlives the command that started it. Its working folder is _engine/, where
        # Spark's stray files (spark-warehouse, derby.log) then land.
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=env, cwd=files.folder, start_new_session=True, close_fds=True)
    finally:
        os.close(log)
    _launched[process.pid] = process
    return process


def _wait_until_answering(process: subprocess.Popen, port: int, token: str, files: EngineFiles,
                          timeout_seconds: float) -> None:
    deadline = time.monotonic() + timeout_seconds
    problem = "it did not open its port"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EngineStartError(
                f"The Spark Connect engine exited with code {process.returncode} while starting. "
                f"The end of its log ({files.log}):\n{_log_tail(files)}")
        if _listening(port):
            problem = _probe(port, token, timeout_seconds=max(1.0, deadline - time.monotonic()), warm_up=True)
            if problem is None:
                return
        time.sleep(_POLL_SECONDS)
    raise EngineStartError(
        f"The Spark Connect engine did not answer on port {port} within {timeout_seconds:.0f} s ({problem}); "
        f"it was stopped. The end of its log ({files.log}):\n{_log_tail(files)}")


def _log_tail(files: EngineFiles, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = files.log.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.rstrip("\n").splitlines()[-lines:]) or "(empty log)"


# --- asking -----------------------------------------------------------------------------------

def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _probe(port: int, token: str | None, *, timeout_seconds: float, warm_up: bool = False) -> str | None:
    """None when the engine on ``port`` serves an authenticated request (and, with
    ``warm_up``, runs a one-row job); else what went wrong."""
    if not _listening(port):
        return f"nothing listens on port {port}"
    if not token:
        return "its token file is missing"
    outcome: list[str | None] = []
    worker = threading.Thread(target=lambda: outcome.append(_authenticated_request(port, token, warm_up)),
                              name="lakehouse-engine-probe", daemon=True)
    worker.start()
    worker.join(timeout_seconds)
    if not outcome:
        return f"no answer within {timeout_seconds:.0f} s"
    return outcome[0]


def _authenticated_request(port: int, token: str, warm_up: bool) -> str | None:
    # A Connect session object of its own, not SparkSession.builder.remote(): the builder
    # would switch this whole process into Connect mode and make this its default session.
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    url = EngineAddress("localhost", port, {}).with_token(token).url()
    spark = None
    try:
        spark = ConnectSession(connection=url)
        # An engine that is still starting refuses connections: fail fast, the caller retries.
        spark.client.set_retry_policies([DefaultPolicy(max_retries=2, initial_backoff=100, max_backoff=500)])
        spark.version  # noqa: B018 - an authenticated round trip
        if warm_up:
            spark.range(1).count()  # the first job pays for loading Spark's classes; not a run
        return None
    except Exception as exc:  # noqa: BLE001 - gRPC errors have no common base worth naming
        if spark is not None:
            spark.release_session_on_close = False  # nothing to release; do not retry to say so
        return _reason(exc)
    finally:
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if "UNAUTHENTICATED" in text or "authentication" in text.lower():
        return "it refused the token of _engine/token (another engine may hold the port)"
    first = text.strip().splitlines()[0][:300] if text.strip() else ""
    return first or type(exc).__name__


# --- stopping ---------------------------------------------------------------------------------

def _end_engine(pid: int | None, files: EngineFiles, *, timeout_seconds: float) -> None:
    """SIGTERM the server's process group (SIGKILL after ``timeout_seconds``), then every
    process left that carries the engine's marker."""
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)  # started in a session of its own: group id = pid
        if not _wait_gone([pid], timeout_seconds):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            _wait_gone([pid], 5)
    _end_leftovers(files)


def _end_leftovers(files: EngineFiles) -> None:
    """End every process carrying the engine's marker: SIGTERM, then SIGKILL."""
    leftovers = _marked_processes(files)
    for leftover in leftovers:
        _signal(leftover, signal.SIGTERM)
    if leftovers and not _wait_gone(leftovers, _LEFTOVER_GRACE_SECONDS):
        for leftover in _marked_processes(files):
            _signal(leftover, signal.SIGKILL)
        _wait_gone(leftovers, _LEFTOVER_GRACE_SECONDS)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


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


def _marked_processes(files: EngineFiles) -> list[int]:
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


def _remove_files(files: EngineFiles) -> None:
    for path in (files.state, files.token, files.properties):
        path.unlink(missing_ok=True)


# --- records ----------------------------------------------------------------------------------

def _recorded(state: Mapping[str, object], settings: LakehouseSettings) -> tuple[int | None, int]:
    pid, port = state.get("pid"), state.get("port")
    return (pid if isinstance(pid, int) and pid > 0 else None,
            port if isinstance(port, int) else settings.engine_port)


def _is_engine_process(pid: int, files: EngineFiles) -> bool:
    """The live Connect server started with this lakehouse's settings file, not whatever
    program got the pid since."""
    if not _alive(pid):
        return False
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return SERVER_CLASS.encode() in arguments and str(files.properties).encode() in arguments


def _public_url(port: int) -> str:
    return f"sc://localhost:{port}"


@contextlib.contextmanager
def _engine_lock(files: EngineFiles) -> Iterator[None]:
    """One start or stop at a time per lakehouse root; the lock goes with the process."""
    files.folder.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(files.folder / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)
