"""The managed local engine of a lakehouse: one Spark Connect server, started, asked after, stopped.

Guarantees (docs/engines.md says how it is used):

* At most one managed engine per lakehouse root: start and stop hold a lock on its ``_engine/``
  folder, and ``start_engine`` returns the engine already running when it answers, once it
  answers an authenticated request and has run one job.
* It listens on 127.0.0.1 only and serves only clients that send the token of ``_engine/token``,
  which is written to owner-only files, never on a command line.
* ``stop_engine`` leaves no process of the engine behind, its Python workers included (found by
  the marker in their environment: :mod:`.processes`). A recorded pid is trusted only while
  ``/proc/<pid>/cmdline`` shows the Connect server with this lakehouse's settings file.
* Nothing here prints or switches the calling process into Spark Connect mode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import fcntl
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse_assets.engine.files import ENGINE_MARKER, EngineFiles, write_private
from lakehouse_assets.engine.probe import listening, probe
from lakehouse_assets.engine.processes import (
    DRIVER_SCRIPT,
    end_engine,
    end_leftovers,
    is_engine_process,
    marked_processes,
    remember_launched,
)
from lakehouse_assets.errors import EngineStartError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark_conf import engine_conf

JAVA_INSTALL_HINT = "sudo apt-get install -y openjdk-17-jre-headless"
APP_NAME = "lakehouse_engine"
LOG_TAIL_LINES = 20
# How long one check of an engine may take before it counts as not answering.
PROBE_TIMEOUT_SECONDS = 10.0
_POLL_SECONDS = 0.25
# Connect clients the server starts with: pyspark and Spark Connect's own variables of a
# caller in Connect mode would make the engine's Python workers believe they are clients too.
_CLIENT_ONLY_ENV = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE",
                    "SPARK_CONNECT_AUTHENTICATE_TOKEN", "LAKEHOUSE_SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")


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
    state, pid, port = _recorded(files, settings)
    url = _public_url(port)
    started_at = state.get("started_at")
    if pid is None:
        return EngineStatus(False, False, None, port, url, files.log,
                            "no engine is running for this lakehouse; start one with `lakehouse engine start`")
    if not is_engine_process(pid, files):
        return EngineStatus(False, False, pid, port, url, files.log,
                            f"the engine (pid {pid}) is not running: it was stopped or it crashed "
                            f"(its log is {files.log}); `lakehouse engine start` starts a new one", started_at)
    problem = probe(port, files.read_token(), timeout_seconds=probe_timeout_seconds)
    if problem:
        doing = "is starting and does not answer yet" if not state.get("ready") else "runs but does not answer"
        return EngineStatus(True, False, pid, port, url, files.log,
                            f"the engine (pid {pid}) {doing} at {url}: {problem}", started_at)
    return EngineStatus(True, True, pid, port, url, files.log,
                        f"the engine (pid {pid}) answers at {url}", started_at)


def attached_to_running_engine(settings: LakehouseSettings) -> LakehouseSettings | None:
    """``settings`` pointed at the lakehouse's managed engine when it has started and its
    process listens (no request is sent: milliseconds); None when no engine runs."""
    files = EngineFiles.of(settings)
    state, pid, port = _recorded(files, settings)
    if pid is None or not state.get("ready") or not is_engine_process(pid, files) or not listening(port):
        return None
    return dataclasses.replace(settings, spark_remote=_public_url(port), engine_port=port)


def start_engine(settings: LakehouseSettings, *, timeout_seconds: float = 180) -> EngineStatus:
    """Start the lakehouse's Spark Connect engine on ``settings.engine_port`` and return once it
    answers and has run a first job; return the running engine instead if one answers.

    The server runs ``spark-submit`` of pip's pyspark on ``settings.spark_master`` with the
    settings of :func:`lakehouse_assets.spark_conf.engine_conf`, in a session of its own, its output
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
        end_leftovers(files)  # what a crashed engine left behind (its Python workers)
        _remove_files(files)
        _check_java()
        port = settings.engine_port
        _check_port_free(port)
        token = secrets.token_urlsafe(32)
        write_private(files.token, token + "\n")
        write_private(files.properties, _properties_text(_server_conf(settings, port, token)))
        process = _launch(settings, files)
        started_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        state = {"pid": process.pid, "port": port, "started_at": started_at, "ready": False}
        files.write_state(state)  # before it answers, so a stop finds it even if this start dies
        try:
            _wait_until_answering(process, port, token, files, timeout_seconds)
        except BaseException:
            end_engine(process.pid, files, timeout_seconds=10)
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
        _, pid, _ = _recorded(files, settings)
        was_running = pid is not None and is_engine_process(pid, files)
        end_engine(pid if was_running else None, files, timeout_seconds=timeout_seconds)
        _remove_files(files)
        return was_running


def engine_processes(settings: LakehouseSettings) -> list[int]:
    """The pids of every live process of the lakehouse's engine: the server and everything
    it started (PySpark's daemon and Python workers), found by the marker in their environment."""
    return marked_processes(EngineFiles.of(settings))


# --- starting ---------------------------------------------------------------------------------

def _check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and not os.access(Path(java_home) / "bin" / "java", os.X_OK):
        raise EngineStartError(
            f"JAVA_HOME is {java_home}, but {java_home}/bin/java is not an executable Java: point JAVA_HOME at a "
            f"Java 17 runtime, or unset it and install one with `{JAVA_INSTALL_HINT}`.")
    if not java_home and shutil.which("java") is None:
        raise EngineStartError(
            "Java is not installed, and Spark needs it: install a Java 17 runtime with "
            f"`{JAVA_INSTALL_HINT}` (or set JAVA_HOME to one), then start the engine again.")


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
    lines += [f"{_escape(key)}={_escape(value)}" for key, value in sorted(conf.items())]
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    """``text`` as a key or value of a properties file: a character that could mean something
    there (a space, ``\\=:#!``, a control or non-ASCII one) as its ``\\uXXXX`` (UTF-16) escape."""
    data = text.encode("utf-16-le")
    units = struct.unpack(f"<{len(data) // 2}H", data)
    return "".join(chr(u) if "!" < chr(u) <= "~" and chr(u) not in "\\=:#" else f"\\u{u:04x}" for u in units)


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


def _spark_home(files: EngineFiles, installed: Path) -> Path:
    """pyspark's Spark home (``installed``) for the engine, without its Python archives.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's) first on the path of every
    Python worker it starts, and an engine starts one per streaming query with a
    ``foreachBatch`` function. From a zip, pyspark is compiled from source at each start (2.3 s
    of CPU, measured); from the installed package, whose bytecode is cached, 1.0 s. The workers
    run this environment's Python, which has the same pyspark installed: a home whose ``python``
    folder is absent lets them import it from there."""
    if not (installed / "jars").is_dir():  # not pip's layout: leave it as it is
        return installed
    home = files.folder / "spark_home"
    home.mkdir(exist_ok=True)
    for part in ("bin", "jars", "sbin"):
        link, target = home / part, installed / part
        if not (link.is_symlink() and link.readlink() == target):
            link.unlink(missing_ok=True)
            link.symlink_to(target, target_is_directory=True)
    return home


def _launch(settings: LakehouseSettings, files: EngineFiles) -> subprocess.Popen[bytes]:
    spark_submit = _spark_submit()
    env = _engine_env(files)
    env.update({
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_HOME": str(_spark_home(files, spark_submit.parent.parent)),
    })
    command = [str(spark_submit), "--master", settings.spark_master, "--properties-file", str(files.properties),
               str(DRIVER_SCRIPT)]
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
    remember_launched(process)
    return process


def _wait_until_answering(process: subprocess.Popen[bytes], port: int, token: str, files: EngineFiles,
                          timeout_seconds: float) -> None:
    deadline = time.monotonic() + timeout_seconds
    problem: str | None = "it did not open its port"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EngineStartError(
                f"The Spark Connect engine exited with code {process.returncode} while starting. "
                f"The end of its log ({files.log}):\n{_log_tail(files)}")
        if listening(port):
            problem = probe(port, token, timeout_seconds=max(1.0, deadline - time.monotonic()), warm_up=True)
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


def _remove_files(files: EngineFiles) -> None:
    for path in (files.state, files.token, files.properties):
        path.unlink(missing_ok=True)


# --- records ----------------------------------------------------------------------------------

def _recorded(files: EngineFiles, settings: LakehouseSettings) -> tuple[dict[str, Any], int | None, int]:
    """The engine's recorded state, and its server's pid (None when there is none) and port."""
    state = files.read_state() or {}
    pid, port = state.get("pid"), state.get("port")
    return (state, pid if isinstance(pid, int) and pid > 0 else None,
            port if isinstance(port, int) else settings.engine_port)


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
