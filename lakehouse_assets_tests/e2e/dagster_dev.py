"""Start and stop a real Dagster deployment (``dagster dev``, or the webserver and the daemon
as separate processes) over a temporary ``DAGSTER_HOME`` and ``LAKEHOUSE_ROOT``.

Used by the end-to-end tests and the benchmarks::

    with DagsterDeployment(home=tmp / "home", root=tmp / "root", log_dir=tmp) as dagster:
        dagster.start_dev()
        dagster.wait_until_loaded()
        ...                      # land files, poll tables, query dagster.graphql(...)
        report = dagster.stop()  # Ctrl-C to every process group, then look for leftovers
        assert report.clean, report.describe()

Every process is started in a session of its own, so its whole tree (code servers, run
workers, Spark's JVM and Python workers) shares one process group that a signal can reach,
and that /proc can be searched for leftovers once it should be gone. Only loopback is used:
the webserver binds 127.0.0.1, and Spark is told to do the same.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lakehouse_assets_tests.conftest import SMALL_DATA_CONF, TEST_JVM_OPTIONS

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTANCE_YAML = REPO_ROOT / "instance" / "dagster.yaml"
WORKSPACE_YAML = REPO_ROOT / "workspace.yaml"
#: What `make run` runs dagster dev with: the engine around it, signals passed on.
MAKE_RUN_SCRIPT = REPO_ROOT / "scripts" / "run_with_engine.sh"

# Short-lived JVMs (one per run): the C1 compiler alone and the serial GC spend far less CPU
# warming up on a 2-core machine; the data is tiny, so two shuffle partitions are plenty.
FAST_SPARK_CONF = {**SMALL_DATA_CONF, "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS}

RUN_FINISHED = frozenset({"SUCCESS", "FAILURE", "CANCELED"})

# What a started service's SIGINT and SIGTERM are set to (options of coreutils' env, see _start):
# as a terminal's foreground job has them, or as `make run &` has them (SIGINT ignored, SIGTERM
# not), whatever this process has them set to.
_ENV = "/usr/bin/env"
_DEFAULT_INTERRUPT_SIGNALS = ("--default-signal=INT,TERM",)
_BACKGROUND_JOB_SIGNALS = ("--ignore-signal=INT", "--default-signal=TERM")


class DagsterDeploymentError(AssertionError):
    """The deployment did not start, answer or stop as expected (a test failure)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether 127.0.0.1:``port`` can be bound, i.e. nothing still listens there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class ProcessInfo:
    """One process as /proc shows it."""

    pid: int
    state: str
    pgid: int
    sid: int
    cmdline: str


def processes_in(groups: Iterable[int]) -> list[ProcessInfo]:
    """Live processes (not zombies) whose process group or session is one of ``groups``.

    Read from /proc, so no psutil is needed: a process that changed its group but not its
    session is still found.
    """
    wanted = set(groups)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone between listing and reading
            continue
        # The command name is in parentheses and may hold spaces: split after the last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgid, sid = fields[0], int(fields[2]), int(fields[3])
        if state in ("Z", "X") or (pgid not in wanted and sid not in wanted):
            continue
        found.append(ProcessInfo(int(entry), state, pgid, sid, cmdline.strip()))
    return found


@dataclass
class StopReport:
    """How a shutdown went."""

    seconds: float
    exit_codes: dict[str, int | None]
    leftovers: list[ProcessInfo] = field(default_factory=list)
    port_released: bool = True
    #: The services' logs after a shutdown that hung, with every leftover Python process's threads.
    hung_logs: str = ""

    @property
    def clean(self) -> bool:
        """Every process exited by itself after the interrupt, and the port is free."""
        return not self.leftovers and self.port_released and all(code is not None for code in self.exit_codes.values())

    def describe(self) -> str:
        lines = [f"shutdown took {self.seconds:.1f}s; exit codes {self.exit_codes}; port released: {self.port_released}"]
        lines += [f"left running (killed): pid {p.pid} [{p.state}] {p.cmdline[:200]}" for p in self.leftovers]
        if self.hung_logs:
            lines.append(self.hung_logs)
        return "\n".join(lines)


@dataclass
class _Started:
    name: str
    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path


class DagsterDeployment:
    """A Dagster deployment on 127.0.0.1 over its own home and lakehouse root.

    ``start_dev()`` runs ``dagster dev`` (what ``make run`` runs); ``start_webserver()`` and
    ``start_daemon()`` run the two services separately, for tests that need the UI before
    the daemon acts. Leaving the ``with`` block stops whatever is still running.
    """

    def __init__(
        self,
        *,
        home: Path,
        root: Path,
        log_dir: Path,
        sensor_interval_seconds: int = 5,
        port: int | None = None,
        spark_conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.home = home
        self.root = root
        self.log_dir = log_dir
        self.port = port or free_port()
        self._started: list[_Started] = []
        for folder in (home, root, log_dir):
            folder.mkdir(parents=True, exist_ok=True)
        # The project's instance settings (one run at a time, queued): what make run uses.
        shutil.copyfile(INSTANCE_YAML, home / "dagster.yaml")
        self.env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "LAKEHOUSE_ROOT": str(root),
            "LAKEHOUSE_SENSOR_INTERVAL": str(sensor_interval_seconds),
            "LAKEHOUSE_SPARK_CONF": json.dumps(dict(FAST_SPARK_CONF if spark_conf is None else spark_conf)),
            # Spark's Python workers must run this virtualenv's interpreter.
            "PYSPARK_PYTHON": sys.executable,
            # Keep Spark's driver on loopback too (it would pick the machine's network address).
            "SPARK_LOCAL_IP": "127.0.0.1",
            # A shutdown that hangs is diagnosed from the stacks: SIGABRT makes Python print every
            # thread's before it dies (see stop).
            "PYTHONFAULTHANDLER": "1",
            **(env or {}),
        }

    # -- starting -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_dev(self, *, as_make_run: bool = False) -> None:
        """``dagster dev`` on 127.0.0.1: webserver, daemon and code server. ``as_make_run``:
        through the script ``make run`` runs it with (scripts/run_with_engine.sh), started as
        ``make run &`` would start it: SIGINT ignored, as a shell's background job has it."""
        dev = [_script("dagster"), "dev", "-h", "127.0.0.1", "-p", str(self.port), "-w", str(WORKSPACE_YAML)]
        if as_make_run:
            self._start("make_run", [str(MAKE_RUN_SCRIPT), *dev], signals=_BACKGROUND_JOB_SIGNALS)
        else:
            self._start("dev", dev)

    def start_webserver(self) -> None:
        """The webserver alone: the UI and GraphQL answer, but no sensor ticks and no queued
        run starts until :meth:`start_daemon`."""
        self._start("webserver", [_script("dagster-webserver"), "-h", "127.0.0.1", "-p", str(self.port), "-w", str(WORKSPACE_YAML)])

    def start_daemon(self) -> None:
        """The daemon alone: sensors, declarative automation and the run queue."""
        self._start("daemon", [_script("dagster-daemon"), "run", "-w", str(WORKSPACE_YAML)])

    def _start(self, name: str, command: list[str], signals: tuple[str, ...] = _DEFAULT_INTERRUPT_SIGNALS) -> None:
        log_path = self.log_dir / f"dagster-{name}.log"
        log = log_path.open("ab")
        popen = subprocess.Popen(
            # A shell that starts jobs in the background (CI, make in the background) leaves
            # SIGINT ignored, and an ignored SIGINT survives exec: Dagster would then ignore
            # Ctrl-C and SIGTERM alike (it maps SIGTERM to SIGINT's handler). coreutils' env sets
            # the signals and execs the command. Not a preexec_fn: it makes Python fork() instead
            # of vfork(), which runs gRPC's fork handlers in the child when this process holds a
            # Spark Connect session (the Connect pass); they restart gRPC's epoll poller there,
            # close_fds then closes its epoll fd before exec, and the child aborts with
            # "epoll_wait error: Bad file descriptor" (SIGABRT; grpc/grpc#43055).
            [_ENV, *signals, *command],
            cwd=REPO_ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            # A session (and process group) of its own: one signal reaches the whole tree, and
            # /proc can tell afterwards whether any of it is left.
            start_new_session=True,
        )
        self._started.append(_Started(name, popen, log, log_path))

    # -- talking to it ------------------------------------------------------------------------
    def graphql(self, query: str, variables: Mapping[str, Any] | None = None, *, timeout: float = 30) -> dict[str, Any]:
        """POST a query to the webserver's GraphQL endpoint; its ``data``, or an error."""
        request = urllib.request.Request(
            f"{self.url}/graphql",
            data=json.dumps({"query": query, "variables": dict(variables or {})}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.load(response)
        if body.get("errors"):
            raise DagsterDeploymentError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def wait_until_loaded(self, timeout: float = 180) -> None:
        """Wait until the webserver answers and has loaded the code location without error."""
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            self._raise_if_exited()
            try:
                entries = self.graphql(_WORKSPACE_QUERY, timeout=10)["workspaceOrError"]["locationEntries"]
            except (urllib.error.URLError, ConnectionError, TimeoutError, DagsterDeploymentError) as exc:
                last = repr(exc)
            else:
                states = {e["name"]: (e["loadStatus"], e["locationOrLoadError"]) for e in entries}
                for name, (_, location) in states.items():
                    if location and location["__typename"] == "PythonError":
                        raise DagsterDeploymentError(f"code location {name} failed to load: {location['message']}")
                if entries and all(status == "LOADED" and location for status, location in states.values()):
                    return
                last = f"locations: {states}"
            time.sleep(1)
        raise DagsterDeploymentError(f"Dagster at {self.url} not ready after {timeout:.0f}s ({last})\n{self.log_tail()}")

    def repository_selector(self) -> dict[str, str]:
        """The one code location's repository, as GraphQL selectors name it."""
        entries = self.graphql(_WORKSPACE_QUERY)["workspaceOrError"]["locationEntries"]
        location = entries[0]
        return {
            "repositoryLocationName": location["name"],
            "repositoryName": location["locationOrLoadError"]["repositories"][0]["name"],
        }

    def sensors(self) -> dict[str, str]:
        """Sensor name -> status (RUNNING or STOPPED)."""
        data = self.graphql(_SENSORS_QUERY, {"selector": self.repository_selector()})
        return {s["name"]: s["sensorState"]["status"] for s in data["sensorsOrError"]["results"]}

    def stop_sensors(self, names: Iterable[str] | None = None) -> None:
        """Stop sensors (all by default) as the UI's toggle does: the state is stored in the
        instance, so a daemon started later never ticks them."""
        data = self.graphql(_SENSORS_QUERY, {"selector": self.repository_selector()})
        wanted = None if names is None else set(names)
        for sensor in data["sensorsOrError"]["results"]:
            if wanted is not None and sensor["name"] not in wanted:
                continue
            result = self.graphql(_STOP_SENSOR, {"id": sensor["sensorState"]["id"]})["stopSensor"]
            if result["__typename"] != "StopSensorMutationResult" or result["instigationState"]["status"] != "STOPPED":
                raise DagsterDeploymentError(f"could not stop sensor {sensor['name']}: {result}")

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest runs, newest first: id, status, start/end time, asset selection, tags."""
        return self.graphql(_RUNS_QUERY, {"limit": limit})["runsOrError"]["results"]

    def raise_on_failed_runs(self) -> None:
        """Fail at once, with the failing step's error, if any run has failed."""
        failed = [run for run in self.runs() if run["status"] in ("FAILURE", "CANCELED")]
        if failed:
            details = "\n".join(
                f"run {run['runId']} {run['status']} ({_asset_names(run)}): {self.run_errors(run['runId'])}" for run in failed
            )
            raise DagsterDeploymentError(f"runs did not succeed:\n{details}")

    def wait_until_idle(self, timeout: float) -> list[dict[str, Any]]:
        """Wait until no run is queued or in progress (asset checks may still be running
        after their asset's table is committed); fail at once on a failed run. Returns the
        runs, newest first."""
        deadline = time.monotonic() + timeout
        while True:
            self._raise_if_exited()
            self.raise_on_failed_runs()
            runs = self.runs()
            busy = [run["runId"] for run in runs if run["status"] not in RUN_FINISHED]
            if not busy:
                return runs
            if time.monotonic() > deadline:
                raise DagsterDeploymentError(f"runs {busy} still queued or running after {timeout:.0f}s\n{self.log_tail()}")
            time.sleep(2)

    def run_errors(self, run_id: str) -> str:
        """The error messages a run logged (step and run failures)."""
        data = self.graphql(_RUN_ERRORS_QUERY, {"runId": run_id})["logsForRun"]
        events = data.get("events") or []
        messages = []
        for event in events:
            if event["__typename"] not in ("ExecutionStepFailureEvent", "RunFailureEvent"):
                continue
            error = event.get("error") or {}
            # The chain holds the cause: a handle_output error's own message only names the step.
            chain = [error.get("message") or event.get("message", "")]
            chain += [link["error"]["message"] for link in error.get("errorChain") or []]
            messages.append(" caused by: ".join(m.strip()[:1500] for m in chain if m))
        return " | ".join(messages) or "no failure event"

    def wait_for_run(self, run_id: str, timeout: float) -> dict[str, Any]:
        """Wait until a run has finished; return it (status SUCCESS, FAILURE or CANCELED)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._raise_if_exited()
            run = self.graphql(_RUN_QUERY, {"runId": run_id})["runOrError"]
            if run["__typename"] != "Run":
                raise DagsterDeploymentError(f"run {run_id}: {run}")
            if run["status"] in RUN_FINISHED:
                return run
            time.sleep(2)
        raise DagsterDeploymentError(f"run {run_id} not finished after {timeout:.0f}s\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of every service's log, for failure messages."""
        parts = []
        for started in self._started:
            started.log.flush()
            text = started.log_path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {started.log_path} (last {len(text)} lines) ---\n" + "\n".join(text))
        return "\n".join(parts)

    def _raise_if_exited(self) -> None:
        for started in self._started:
            code = started.popen.poll()
            if code is not None:
                raise DagsterDeploymentError(f"{started.name} exited early with code {code}\n{self.log_tail()}")

    # -- stopping -----------------------------------------------------------------------------
    def stop(self, timeout: float = 90, *, sig: signal.Signals = signal.SIGINT) -> StopReport:
        """Stop everything as Ctrl-C in a terminal does (or ``sig``, e.g. SIGTERM as a service
        manager stops it): the signal to each process group, then wait for the services to shut
        down their children. Whatever is still alive after ``timeout`` is killed and listed in
        the report, which is then not ``clean``."""
        started_at = time.monotonic()
        groups = [s.popen.pid for s in self._started]  # session leaders: pgid == sid == pid
        for s in self._started:
            if s.popen.poll() is None:
                _signal_group(s.popen.pid, sig)
        deadline = started_at + timeout
        exit_codes: dict[str, int | None] = {}
        for s in self._started:
            try:
                exit_codes[s.name] = s.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                exit_codes[s.name] = None
        # The services' children (run workers, Spark) may outlive them by a moment.
        leftovers = processes_in(groups)
        while leftovers and time.monotonic() < deadline:
            time.sleep(0.5)
            leftovers = processes_in(groups)
        seconds = time.monotonic() - started_at
        hung_logs = ""
        if leftovers or None in exit_codes.values():
            hung_logs = self._dump_stacks(leftovers or processes_in(groups))
        for group in {*groups, *(p.pgid for p in leftovers)}:  # a service's own groups in its session too
            _signal_group(group, signal.SIGKILL)
        for s in self._started:
            if s.popen.poll() is None:
                s.popen.wait(timeout=10)
            s.log.close()
        self._started = []
        return StopReport(seconds=seconds, exit_codes=exit_codes, leftovers=leftovers, port_released=port_is_free(self.port), hung_logs=hung_logs)

    def _dump_stacks(self, processes: list[ProcessInfo]) -> str:
        """Each process's signal masks, every thread's stack of each Python process in ``processes``
        (SIGABRT under PYTHONFAULTHANDLER prints them into its log), then the last lines of the
        services' logs: what a hung shutdown waited on."""
        states = [f"pid {process.pid}: " + " ".join(_signal_state(process.pid)) for process in processes]
        for process in processes:
            if "python" in process.cmdline.split(" ", 1)[0]:  # the interpreter, not a script naming dagster
                try:
                    os.kill(process.pid, signal.SIGABRT)
                except ProcessLookupError:
                    continue
                time.sleep(0.5)  # one dump at a time: they share the log
        time.sleep(1)
        return "\n".join(["signals (hex masks) and wait channel:", *states]) + "\n" + "\n".join(f"---- {s.log_path} (last 200 lines) ----\n" + "\n".join(
            s.log_path.read_text(errors="replace").splitlines()[-200:]) for s in self._started)

    def __enter__(self) -> DagsterDeployment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # A test that failed half-way still must not leave servers, run workers or JVMs behind.
        if self._started:
            self.stop(timeout=30)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # the whole group is already gone
        pass


def _signal_state(pid: int) -> list[str]:
    """What /proc says of ``pid``'s signals (pending, blocked, ignored, caught) and what it waits in."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return ["gone"]
    fields = [line.replace("\t", "") for line in status if line.split(":")[0] in ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")]
    return [*fields, f"wchan:{wchan}"]


def _script(name: str) -> str:
    """A console script of this virtualenv (not whatever PATH finds first)."""
    candidate = Path(sys.executable).with_name(name)
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if not found:
        raise DagsterDeploymentError(f"{name} is not installed in {sys.prefix}; run make install")
    return found


def _asset_names(run: Mapping[str, Any]) -> str:
    return ", ".join("/".join(key["path"]) for key in run.get("assetSelection") or []) or "no asset selection"


_WORKSPACE_QUERY = """
query Workspace {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError {
          __typename
          ... on RepositoryLocation { repositories { name } }
          ... on PythonError { message }
        }
      }
    }
  }
}
"""

_SENSORS_QUERY = """
query Sensors($selector: RepositorySelector!) {
  sensorsOrError(repositorySelector: $selector) {
    ... on Sensors { results { name sensorState { id status } } }
  }
}
"""

_STOP_SENSOR = """
mutation StopSensor($id: String!) {
  stopSensor(id: $id) {
    __typename
    ... on StopSensorMutationResult { instigationState { status } }
    ... on PythonError { message }
  }
}
"""

_RUNS_QUERY = """
query Runs($limit: Int) {
  runsOrError(limit: $limit) {
    ... on Runs {
      results { runId status creationTime startTime endTime assetSelection { path } tags { key value } }
    }
  }
}
"""

_RUN_QUERY = """
query Run($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { runId status startTime endTime assetSelection { path } }
  }
}
"""

_RUN_ERRORS_QUERY = """
query RunErrors($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { message }
        ... on ExecutionStepFailureEvent { error { message errorChain { error { message } } } }
        ... on RunFailureEvent { error { message errorChain { error { message } } } }
      }
    }
  }
}
"""
