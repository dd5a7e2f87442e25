"""Ends the Python planner daemons a long-lived Spark Connect engine would otherwise keep forever.

Why: Spark (4.2) pools its Python workers by their environment, and every streaming query
plans in a session of its own whose artifact id (``SPARK_JOB_ARTIFACT_UUID``) is part of that
environment. So each query that reads a Python data source (the project's Delta source) starts
a ``pyspark.daemon pyspark.sql.worker.plan_data_source_read`` that no later query can reuse and
nothing stops: 60-100 MiB of RSS per query, without bound (measured: +250 MiB of engine RSS
per run of the reference pipeline).

Guarantee: the reaper ends only

* processes of this lakehouse's engine (they carry its marker in their environment),
* that are PySpark daemons of a planner module (:data:`PLANNER_MODULES`), never the task
  workers (``pyspark.worker``) nor a streaming source or ``foreachBatch`` runner,
* whose whole process tree used no CPU for ``idle_seconds``: planning runs when a query
  starts and takes well under a second, so an idle planner's query has long since started.

A daemon that is asked for again after being ended is started anew by Spark (the JVM restarts
a daemon it cannot reach), so reaping costs at most one daemon start. The reaper runs beside
the managed engine (``lakehouse engine start`` launches it) and exits when the server is gone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lakehouse_assets.engine.files import EngineFiles

# Workers that plan one query in the driver and never serve another once their query runs.
PLANNER_MODULES = frozenset({"pyspark.sql.worker.plan_data_source_read"})
DAEMON_MODULE = "pyspark.daemon"
# A planner serves its query once, when it starts (well under a second of CPU); the
# micro-batches are planned by the query's own streaming runner, so 20 s without CPU is done.
DEFAULT_IDLE_SECONDS = 20.0
DEFAULT_POLL_SECONDS = 5.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcessInfo:
    """One process as /proc shows it: its parent, its command line and the CPU it has used."""

    pid: int
    parent: int
    command: tuple[str, ...]
    cpu_seconds: float

    @property
    def planner_module(self) -> str | None:
        """The planner module this process is PySpark's daemon of, or None."""
        command = self.command
        if DAEMON_MODULE in command:
            at = command.index(DAEMON_MODULE)
            if at + 1 < len(command) and command[at + 1] in PLANNER_MODULES:
                return command[at + 1]
        return None


def planner_daemon_load(processes: Iterable[ProcessInfo]) -> dict[int, float]:
    """Each planner daemon among ``processes`` with the CPU seconds its whole tree has used
    (itself and its forked workers): a pure reading of one snapshot."""
    table = list(processes)
    children: dict[int, list[ProcessInfo]] = {}
    for process in table:
        children.setdefault(process.parent, []).append(process)

    def tree_cpu(process: ProcessInfo) -> float:
        return process.cpu_seconds + sum(tree_cpu(child) for child in children.get(process.pid, []))

    # A daemon's forked workers show its command line too: count them in, not as daemons.
    planners = {process.pid for process in table if process.planner_module}
    return {process.pid: tree_cpu(process) for process in table
            if process.pid in planners and process.parent not in planners}


class Reaper:
    """Ends planner daemons idle for ``idle_seconds``, judged over successive sweeps."""

    def __init__(self, engine_folder: Path, *, idle_seconds: float = DEFAULT_IDLE_SECONDS) -> None:
        self.engine_folder = engine_folder
        self.idle_seconds = idle_seconds
        # pid -> (CPU seconds last seen, when that value was first seen)
        self._seen: dict[int, tuple[float, float]] = {}

    def sweep(self, now: float | None = None) -> list[int]:
        """Look at the engine's processes once; end the planner daemons whose CPU has not
        moved for ``idle_seconds``. Returns the pids signalled."""
        now = time.monotonic() if now is None else now
        load = planner_daemon_load(engine_process_table(self.engine_folder))
        seen: dict[int, tuple[float, float]] = {}
        ended = []
        for pid, cpu in load.items():
            last_cpu, since = self._seen.get(pid, (cpu, now))
            since = since if cpu == last_cpu else now
            if now - since >= self.idle_seconds:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)  # the daemon ends its workers and exits
                    ended.append(pid)
            else:
                seen[pid] = (cpu, since)
        self._seen = seen
        return ended


def engine_process_table(engine_folder: Path) -> list[ProcessInfo]:
    """Every live process that carries the engine's marker for ``engine_folder``."""
    marker = EngineFiles(engine_folder).marker.encode()
    table = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            process = _read_process(entry)
        except (OSError, IndexError, ValueError):  # gone, or another user's
            continue
        if process is not None:
            table.append(process)
    return table


def _read_process(entry: Path) -> ProcessInfo | None:
    # The command name in /proc/<pid>/stat may hold spaces and parentheses: split after the last ')'.
    fields = (entry / "stat").read_text().rpartition(")")[2].split()
    if fields[0] in ("Z", "X"):
        return None
    command = tuple(part.decode(errors="replace") for part in (entry / "cmdline").read_bytes().split(b"\0") if part)
    user, system = int(fields[11]), int(fields[12])  # utime and stime, in clock ticks
    return ProcessInfo(int(entry.name), int(fields[1]), command, (user + system) / _CLOCK_TICKS)


def run(engine_folder: Path, server_pid: int, *, idle_seconds: float, poll_seconds: float) -> None:
    """Sweep every ``poll_seconds`` until the engine's server process is gone."""
    reaper = Reaper(engine_folder, idle_seconds=idle_seconds)
    while _alive(server_pid):
        reaper.sweep()
        time.sleep(poll_seconds)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def main(argv: list[str] | None = None) -> int:
    """``python -m lakehouse_assets.engine.reaper --engine-folder F --server-pid P``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine-folder", type=Path, required=True)
    parser.add_argument("--server-pid", type=int, required=True)
    parser.add_argument("--idle-seconds", type=float, default=DEFAULT_IDLE_SECONDS)
    parser.add_argument("--poll-seconds", type=float, default=DEFAULT_POLL_SECONDS)
    args = parser.parse_args(argv)
    run(args.engine_folder, args.server_pid, idle_seconds=args.idle_seconds, poll_seconds=args.poll_seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
