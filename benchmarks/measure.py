"""Timing a contender's whole process and sampling the resident memory of its process tree.

Every contender runs as a child process (a fresh JVM), so "whole process" seconds and peak
RSS are comparable between contenders. RSS is summed over the child and all its
descendants (the JVM that spark-submit starts, Spark's Python workers), sampled from /proc
(no psutil here). Children report the phases they can see (session start, queries, the
Dagster run) as JSON in a file the parent names; those are wall-clock epochs, so the parent
can place them on the same time line as the process start and exit.
"""

from __future__ import annotations

import json
import os
import select
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAGE_KIB = 1024

#: How often the sampler looks at /proc. Fast enough to see a JVM's peak, cheap enough not
#: to disturb a 2-core machine (one sample walks a few dozen /proc files).
SAMPLE_INTERVAL_SECONDS = 0.1

#: Environment variable through which a child learns where to write its phases.
PHASES_ENV = "BENCH_PHASES_FILE"

#: How often the sampler asks again which processes an engine has (a /proc-wide search);
#: between two asks, new processes under the ones it knows are found by walking their trees.
EXTRA_ROOTS_EVERY_SAMPLES = 10

#: Prefix of the memory makeup's kinds for processes of an engine, not of the run itself.
ENGINE_KIND_PREFIX = "engine "


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(c) for c in handle.read().split())
        except OSError:
            continue
    return found


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants, as /proc sees them now."""
    return [p for p, _ in process_tree_with_parents(pid)]


def process_tree_with_parents(pid: int) -> list[tuple[int, int | None]]:
    """``(pid, parent)`` for ``pid`` and all its descendants."""
    seen: dict[int, int | None] = {}
    stack: list[tuple[int, int | None]] = [(pid, None)]
    while stack:
        current, parent = stack.pop()
        if current in seen:
            continue
        seen[current] = parent
        stack.extend((child, current) for child in _children(current))
    return list(seen.items())


def rss_bytes(pid: int) -> int:
    """VmRSS of one process, 0 if it is gone (or a zombie without memory)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * PAGE_KIB
    except (OSError, ValueError, IndexError):
        pass
    return 0


def pss_bytes(pid: int) -> int:
    """Proportional set size: shared pages split between the processes sharing them."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * PAGE_KIB
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def is_unexeced_fork(pid: int, parent: int | None) -> bool:
    """A child the JVM forked that has not exec'd yet (how Spark starts its Python daemon):
    for that instant it shows the JVM's whole RSS again, which is no memory of its own."""
    if parent is None:
        return False
    exe = _exe(pid)
    return bool(exe) and exe == _exe(parent) and os.path.basename(exe) == "java"


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def tree_rss_bytes(pid: int) -> int:
    return sum(rss_bytes(p) for p in process_tree(pid))


def process_kind(pid: int) -> str:
    """``java`` (the JVM), ``python`` (driver or Spark worker) or the command's name."""
    try:
        with open(f"/proc/{pid}/comm") as handle:
            name = handle.read().strip()
    except OSError:
        return "gone"
    return "python" if name.startswith("python") else name


class TreeSampler(threading.Thread):
    """Samples the memory of a process tree until stopped: the peak of the summed RSS (what
    the issue asks for; a JVM's fork that has not exec'd yet is left out), the peak of the
    summed PSS (shared pages counted once), and the RSS makeup by process kind at the peak.

    ``extra_roots``, when given, lists more processes that count too (every process of a Spark
    Connect engine: its server and Python workers, which a run uses but did not start), asked
    again every :data:`EXTRA_ROOTS_EVERY_SAMPLES` samples; their kinds are prefixed with
    ``engine `` in the makeup.
    """

    def __init__(self, pid: int, interval: float = SAMPLE_INTERVAL_SECONDS,
                 extra_roots: Callable[[], Iterable[int]] | None = None) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.extra_roots = extra_roots
        self.peak = 0
        self.peak_pss = 0
        self.samples = 0
        self.peak_processes = 0
        self.peak_makeup: dict[str, int] = {}
        self._known_extra: list[int] = []
        self._stop_event = threading.Event()

    def _processes(self) -> list[tuple[int, str]]:
        """``(pid, kind prefix)`` of every process to count now."""
        own = [(p, "") for p, parent in process_tree_with_parents(self.pid) if not is_unexeced_fork(p, parent)]
        if self.extra_roots is None:
            return own
        if self.samples % EXTRA_ROOTS_EVERY_SAMPLES == 0:
            # The list names every process already (no tree to walk); a JVM's fork caught
            # before its exec is left out, as in the run's own tree.
            self._known_extra = [p for p in self.extra_roots() if not is_unexeced_fork(p, _parent(p))]
        seen = {p for p, _ in own}
        return own + [(p, ENGINE_KIND_PREFIX) for p in self._known_extra if p not in seen]

    def run(self) -> None:
        while not self._stop_event.is_set():
            processes = self._processes()
            sizes = [(p, prefix, rss_bytes(p)) for p, prefix in processes]
            total = sum(size for _, _, size in sizes)
            self.samples += 1
            if total > self.peak:
                self.peak = total
                self.peak_processes = len(sizes)
                makeup: dict[str, int] = {}
                for p, prefix, size in sizes:
                    kind = prefix + process_kind(p)
                    makeup[kind] = makeup.get(kind, 0) + size
                self.peak_makeup = makeup
            # PSS walks every page table: sample it at a quarter of the rate.
            if self.samples % 4 == 1:
                self.peak_pss = max(self.peak_pss, sum(pss_bytes(p) for p, _ in processes))
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)


@dataclass
class ProcessResult:
    """One child process: how long it ran, how much memory its tree held at most, and what
    it reported about its phases."""

    argv: list[str]
    wall_seconds: float
    peak_rss_bytes: int
    returncode: int
    started_at: float
    ended_at: float
    phases: dict[str, Any] = field(default_factory=dict)
    log_path: str = ""
    peak_makeup: dict[str, int] = field(default_factory=dict)
    peak_pss_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "wall_seconds": round(self.wall_seconds, 3),
            "peak_rss_mib": round(self.peak_rss_bytes / 2**20, 1),
            "peak_rss_makeup_mib": {k: round(v / 2**20) for k, v in sorted(self.peak_makeup.items()) if v},
            "peak_pss_mib": round(self.peak_pss_bytes / 2**20, 1),
            "returncode": self.returncode,
            "phases": self.phases,
            "log": self.log_path,
        }


class ChildFailed(RuntimeError):
    """A contender's process exited non-zero or ran out of time."""


def run_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    log_path: str | Path,
    timeout_seconds: float = 900,
    check: bool = True,
    extra_roots: Callable[[], Iterable[int]] | None = None,
) -> ProcessResult:
    """Run ``argv`` to completion, timing it from spawn to exit and sampling its tree's RSS
    (and that of ``extra_roots``' trees: see :class:`TreeSampler`).

    Output goes to ``log_path``. The child's phases are read from the JSON file named by
    ``$BENCH_PHASES_FILE`` (set here), when the child wrote one.
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    phases_path = log_path.with_suffix(".phases.json")
    phases_path.unlink(missing_ok=True)
    child_env = dict(os.environ if env is None else env)
    child_env[PHASES_ENV] = str(phases_path)
    with open(log_path, "wb") as log:
        started = time.time()
        t0 = time.monotonic()
        process = subprocess.Popen(
            list(argv), env=child_env, cwd=None if cwd is None else str(cwd),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        sampler = TreeSampler(process.pid, extra_roots=extra_roots)
        sampler.start()
        try:
            returncode = process.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            returncode = -9
        except BaseException:  # interrupted: take the child's whole group down with us
            _kill_group(process)
            raise
        finally:
            wall = time.monotonic() - t0
            sampler.stop()
        # A JVM or Python worker left behind by the child would skew the next contender.
        _kill_group(process)
    phases = _read_phases(phases_path)
    result = ProcessResult(
        argv=list(argv), wall_seconds=wall, peak_rss_bytes=sampler.peak, returncode=returncode,
        started_at=started, ended_at=started + wall, phases=phases, log_path=str(log_path),
        peak_makeup=sampler.peak_makeup, peak_pss_bytes=sampler.peak_pss,
    )
    if check and returncode != 0:
        tail = _tail(log_path)
        raise ChildFailed(f"{' '.join(argv[:4])} ... exited {returncode}; log {log_path}:\n{tail}")
    return result


def _read_phases(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return {"error": "unreadable phases file"}


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """End what is left of the child's own process group (its session, started for it)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# -- what a child reports -----------------------------------------------------------------------


class Phases:
    """Used inside a child: marks named moments (epoch seconds) and extra values, and writes
    them where the parent asked, at every mark (so a crash still leaves what happened)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or os.environ.get(PHASES_ENV)
        self.data: dict[str, Any] = {"marks": {}, "values": {}}

    def mark(self, name: str) -> float:
        now = time.time()
        self.data["marks"][name] = now
        self._write()
        return now

    def value(self, name: str, value: Any) -> None:
        self.data["values"][name] = value
        self._write()

    def _write(self) -> None:
        if not self.path:
            return
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as handle:
            json.dump(self.data, handle)
        os.replace(tmp, self.path)


# -- a long-lived child that runs on command ------------------------------------------------------

#: Environment variable naming the file descriptor a resident child answers on (its stdout
#: and stderr are its log, where Spark and the JVM write too).
REPLY_FD_ENV = "BENCH_REPLY_FD"


class ResidentChild:
    """A child process started once that runs one request at a time on command (a warm
    SparkSession, say): its start is paid once, each request is timed and its tree's memory
    sampled as :func:`run_child` does for a whole process.

    Requests are JSON lines on the child's stdin; the child answers each with one JSON line
    on the descriptor named by ``$BENCH_REPLY_FD`` (see :func:`serve_requests`).
    """

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | Path | None, log_path: Path) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.log_path = Path(log_path)
        self.process: subprocess.Popen[bytes] | None = None
        self._replies: Any = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout_seconds: float = 300) -> float:
        """Start the child and wait until it says it is ready; the seconds that took."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        read_end, write_end = os.pipe()
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.argv, env={**self.env, REPLY_FD_ENV: str(write_end)}, cwd=None if self.cwd is None else str(self.cwd),
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_end,),
                start_new_session=True,
            )
        os.close(write_end)
        self._replies = os.fdopen(read_end, "r")
        try:
            self._reply(timeout_seconds)
        except BaseException:
            self.stop()
            raise
        return time.monotonic() - started

    def request(self, payload: Mapping[str, Any], *, phases_path: Path, timeout_seconds: float = 1_200) -> ProcessResult:
        """Run one request, timed from sending it to its answer; raise :class:`ChildFailed`
        when it fails (the child stays up) or when the child dies or hangs (then it is stopped)."""
        if not self.running or self.process is None:
            raise ChildFailed(f"{self.argv[2] if len(self.argv) > 2 else self.argv[0]} is not running; log {self.log_path}")
        phases_path.unlink(missing_ok=True)
        sampler = TreeSampler(self.process.pid)
        started = time.time()
        t0 = time.monotonic()
        sampler.start()
        try:
            assert self.process.stdin is not None
            self.process.stdin.write((json.dumps({**payload, "phases_file": str(phases_path)}) + "\n").encode())
            self.process.stdin.flush()
            reply = self._reply(timeout_seconds)
        except BaseException:
            self.stop()
            raise
        finally:
            wall = time.monotonic() - t0
            sampler.stop()
        result = ProcessResult(
            argv=self.argv, wall_seconds=wall, peak_rss_bytes=sampler.peak, returncode=0 if reply.get("ok") else 1,
            started_at=started, ended_at=started + wall, phases=_read_phases(phases_path), log_path=str(self.log_path),
            peak_makeup=sampler.peak_makeup, peak_pss_bytes=sampler.peak_pss,
        )
        if not reply.get("ok"):
            raise ChildFailed(f"request {dict(payload)} failed: {reply.get('error')}; log {self.log_path}")
        return result

    def _reply(self, timeout_seconds: float) -> dict[str, Any]:
        ready, _, _ = select.select([self._replies], [], [], timeout_seconds)
        if not ready:
            raise ChildFailed(f"no answer within {timeout_seconds:.0f} s; log {self.log_path}:\n{_tail(self.log_path)}")
        line = self._replies.readline()
        if not line:
            code = self.process.wait(timeout=10) if self.process is not None else None
            raise ChildFailed(f"the resident child exited ({code}); log {self.log_path}:\n{_tail(self.log_path)}")
        return json.loads(line)

    def stop(self, timeout_seconds: float = 30) -> None:
        """Close its stdin (it stops its session and exits), then end its whole group."""
        if self.process is None:
            return
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=timeout_seconds)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            _kill_group(self.process)
            if self._replies is not None:
                self._replies.close()
            self.process, self._replies = None, None


def serve_requests(handle: Callable[[Mapping[str, Any], Phases], None]) -> int:
    """Inside a resident child, once it is ready: say so, then ``handle`` each request from
    stdin with the phases file it names, answering ``ok`` or the error. Returns at EOF."""
    reply = os.fdopen(int(os.environ[REPLY_FD_ENV]), "w", buffering=1)
    reply.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        phases = Phases(request.get("phases_file"))
        phases.mark("request_received")
        print(f"=== request {json.dumps({k: v for k, v in request.items() if k != 'phases_file'})}", flush=True)
        try:
            handle(request, phases)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, the child stays up
            traceback.print_exc()
            reply.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:1_500]}"}) + "\n")
        else:
            reply.write(json.dumps({"ok": True}) + "\n")
    return 0


# -- summaries ------------------------------------------------------------------------------------


def head_commit(repo: Path) -> str:
    """The short commit the checkout at ``repo`` stands at: which code a result measured
    (empty when git cannot say)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return ""


def median(values: Sequence[float]) -> float | None:
    clean = [v for v in values if v is not None]
    return statistics.median(clean) if clean else None


def spread(values: Sequence[float]) -> dict[str, float] | None:
    clean = [v for v in values if v is not None]
    if not clean:
        return None
    return {"min": round(min(clean), 3), "max": round(max(clean), 3), "n": len(clean)}
