"""Crash injection: materialize the whole graph in a child process and SIGKILL it, again and again.

Each round lands a little new data (with bad records, so the quarantine is used), then starts
:mod:`crash_child` as the leader of its own process group, with ``LAKEHOUSE_ROOT`` pointing at
the harness's lakehouse, and kills the whole group (Spark's JVM and Python workers too):

- at a named fault point (``LAKEHOUSE_FAULT=<point>:<hit>``, see :mod:`lakehouse_assets.faults`):
  while a batch's data files are written, after a Delta commit and before the checkpoint
  records the batch, after the checkpoint logged a batch's offsets and before anything is
  written, between assets; the hit number picks which table or batch;
- or at a random moment: the parent kills the group after a seeded random delay, which can
  fall anywhere, Spark writing its checkpoint or state files included.

The next round's run is the rerun that recovers from the kill. After every kill the
invariants that must hold at any moment are checked (``pending_ok``: nothing duplicated,
nothing half-written, no batch committed twice); every few kills, and at the
end, a clean run (no fault) is followed by the full invariants.

Everything random comes from one seed (``LAKEHOUSE_CRASH_SEED``, else random and printed): the
schedule of points, hits, delays and landings is the same for a seed. Random-moment kills
depend on the machine's speed as well, so they hit different instructions from run to run.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lakehouse_assets.faults import ENV_VAR as FAULT_ENV_VAR
from lakehouse_assets.location import Location
from lakehouse_assets.reliability import Flows, InvariantReport, check_all
from lakehouse_assets.reliability.flows import project_flows
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import land
from lakehouse_assets.spark_conf import archive_options
from lakehouse_assets_tests.conftest import SMALL_DATA_CONF, TEST_JVM_OPTIONS
from lakehouse_assets_tests.reliability.crash_child import WITHOUT_CHECKS

SEED_ENV_VAR = "LAKEHOUSE_CRASH_SEED"
RANDOM_KILL = "random"
ENGINE_KILL = "engine"
# A kill as soon as a file appears: a checkpoint's offsets for a query that Delta's own
# streaming sink writes, which no fault point reaches.
FILE_KILL = "file"
# The fault points in the order a run meets them, then kills at a random moment.
KINDS = ("batch.started", "delta.files_written", "delta.committed", "asset.materialized", RANDOM_KILL)
# On a Spark Connect engine the sink runs in the engine's Python workers, where the run's
# fault points are not armed: the run's own point, kills of the run at a random moment, and
# SIGKILLs of the engine itself while the run goes on.
ENGINE_KINDS = ("asset.materialized", RANDOM_KILL, ENGINE_KILL)
# What a run whose engine died must say (EngineUnavailableError's opening).
ENGINE_LOST_MESSAGE = "No Spark engine answers at"
# The most a run of the whole graph with new data can reach each point: batch.started once
# per sink call, the Delta points once per write of the lakehouse's own sinks, and
# asset.materialized once per asset output (six tables). Writes that Delta's own streaming
# sink makes reach no point, so runs reach fewer than this; a campaign learns how many
# (`CrashHarness.reach`) and draws its hits from that.
MAX_HIT = {"batch.started": 5, "delta.files_written": 6, "delta.committed": 6, "asset.materialized": 6}
# Small data: a round's cost is the JVM start and the queries' fixed costs, not the rows.
LANDING = dict(records_per_file=120, bad_rate=0.05, files_per_year=8760)
_STEP_START = re.compile(r" - ([A-Za-z0-9_]+) - STEP_START - ")
_CHILD_TIMEOUT_SECONDS = 600
# The child imports lakehouse_assets_tests, which is not installed: it runs from this checkout.
_CHECKOUT = Path(__file__).resolve().parents[2]


@dataclass
class RunOutcome:
    """One child run: how it ended and where it was."""

    kind: str  # a fault point, "random", "engine", or "clean"
    hit: int | None
    delay: float | None
    returncode: int
    duration: float
    last_step: str | None
    log: str
    #: The engine the run was attached to was SIGKILLed while the run went on.
    engine_killed: bool = False

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL or self.engine_killed


@dataclass
class CheckRecord:
    """The invariants checked after one run."""

    after: str  # "kill N" or "clean run N" or "final clean run"
    pending_ok: bool
    ok: bool
    summary: str


@dataclass
class CrashSummary:
    """What a crash campaign did and found: the figures the README quotes."""

    seed: int
    kills_requested: int
    kills: int = 0
    attempts: int = 0
    #: Runs that were not killed because the fault point was not reached that often, or the
    #: random delay outlasted the run: they completed, and are reruns too.
    survived: int = 0
    clean_runs: int = 0
    failed_runs: list[str] = field(default_factory=list)
    kills_by_point: Counter = field(default_factory=Counter)
    kills_by_step: Counter = field(default_factory=Counter)
    landed_files: int = 0
    landed_records: int = 0
    checks: list[CheckRecord] = field(default_factory=list)
    clean_run_seconds: list[float] = field(default_factory=list)
    killed_run_seconds: list[float] = field(default_factory=list)
    #: On an engine: how long `lakehouse engine start` took to bring it back after each kill.
    engine_restart_seconds: list[float] = field(default_factory=list)
    #: The most arrivals at each fault point the campaign saw a run with new data make (at
    #: most MAX_HIT; lowered each time such a run outlived its hit).
    reach: dict[str, int] = field(default_factory=lambda: dict(MAX_HIT))
    duration_seconds: float = 0.0

    @property
    def reruns(self) -> int:
        """Runs started after a kill, each recovering from it (the killed runs that followed
        a kill, the survivors and the clean runs)."""
        return max(self.attempts + self.clean_runs - 1, 0)

    @property
    def ok(self) -> bool:
        return not self.failed_runs and all(c.ok for c in self.checks)

    def failures(self) -> str:
        """Everything that went wrong, for an assertion message."""
        lines = [f"seed {self.seed} ({SEED_ENV_VAR}={self.seed} reproduces the schedule)"]
        lines += [f"run failed: {f}" for f in self.failed_runs]
        lines += [f"invariants after {c.after}:\n{c.summary}" for c in self.checks if not c.ok]
        return "\n".join(lines)

    def as_dict(self) -> dict:
        data = asdict(self)
        data.update(reruns=self.reruns, ok=self.ok,
                    kills_by_point=dict(self.kills_by_point), kills_by_step=dict(self.kills_by_step))
        return data


def crash_seed() -> int:
    """The seed of this campaign: ``LAKEHOUSE_CRASH_SEED``, else a fresh one (print it)."""
    text = os.environ.get(SEED_ENV_VAR, "").strip()
    return int(text) if text else random.SystemRandom().randrange(1, 2**31)


def _land_recordings(landing: Path | Location, files: int, seed: int) -> tuple[int, int]:
    landed = land(landing, files=files, seed=seed % 1000, **LANDING)
    return len(landed.files), landed.counts.total


@dataclass(frozen=True)
class CampaignSource:
    """What a campaign lands between runs, and which tables its runs materialize: ``land``
    lands files under the landing folder given (returning how many files and records): a
    local path, or a :class:`Location` on object storage when the harness's root is there;
    ``assets`` selects the tables (none: the seeds' pipeline), declared in the project, in
    ``packages`` (``LAKEHOUSE_ASSET_PACKAGES``) or in the pipeline folders ``pipelines``
    (``LAKEHOUSE_PIPELINES``)."""

    land: Callable[[Path | Location, int, int], tuple[int, int]]
    assets: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    pipelines: tuple[Path, ...] = ()

    def flows(self, settings: LakehouseSettings) -> Flows:
        """The flows of the tables the runs materialize: those ``assets`` selects, else every
        table the project declares (the seeds' pipeline among them). A table left out, reading
        the same landing folder, would count the landed files as lost."""
        declared = project_flows(settings)
        if not self.assets:
            return declared
        tables = {asset.replace("/", ".") for asset in self.assets}
        return Flows(tuple(i for i in declared.ingestions if i.bronze in tables),
                     tuple(r for r in declared.routings if r.table in tables),
                     tuple(r for r in declared.recomputations if r.table in tables))

    def environment(self) -> dict[str, str]:
        """The variables declaring the source's tables, for the runs and for the invariants:
        set, or emptied, whatever the harness's own environment says."""
        return {"LAKEHOUSE_ASSET_PACKAGES": ",".join(self.packages),
                "LAKEHOUSE_PIPELINES": os.pathsep.join(str(folder) for folder in self.pipelines)}


#: The reference recordings (5% bad records) through the seeds' pipeline.
RECORDINGS = CampaignSource(_land_recordings)


class CrashHarness:
    """Kill runs of the whole graph over one lakehouse at ``work_dir/lakehouse``, or at ``root``."""

    def __init__(self, work_dir: Path, seed: int, *, clean_every: int = 5, engine_port: int | None = None,
                 spark_master: str | None = None, log: Callable[[str], None] = lambda line: None,
                 source: CampaignSource = RECORDINGS, root: str | None = None) -> None:
        """With ``engine_port``, every run attaches to a managed Spark Connect engine of the
        harness's lakehouse on that port (see :meth:`start_engine`), whose driver runs on
        ``spark_master`` (default local), and campaigns kill the engine too. ``source`` says
        what is landed and run (by default the reference recordings and the seeds' pipeline);
        the invariants are checked for every table of its runs that its declarations put in a
        flow (:meth:`CampaignSource.flows`).

        ``root`` puts the lakehouse on S3-API object storage (``s3a://bucket/prefix``) instead,
        reached as this process's AWS variables say: the runs, their engine and the invariants
        take the store's endpoint and credentials from the environment, as a user's would. The
        machine's own files of the lakehouse (an engine's pid, token and log) are then kept
        under ``work_dir/state`` (``XDG_STATE_HOME``); the runs' logs stay in ``work_dir/logs``."""
        self.work_dir = work_dir
        self.source = source
        # What every process of the harness's lakehouse is told: the runs, the engine, the checks.
        self._root_env = {"LAKEHOUSE_ROOT": str(work_dir / "lakehouse")}
        if root is not None:
            self._root_env = {"LAKEHOUSE_ROOT": root, "XDG_STATE_HOME": str(work_dir / "state"),
                              **{k: v for k, v in os.environ.items() if k.startswith("AWS_")}}
        self.settings = LakehouseSettings.from_env({**self._root_env, **source.environment()})
        #: The lakehouse's root, on a local disk or on the store.
        self.location: Location = self.settings.root
        self.location.mkdir()
        self.flows = source.flows(self.settings)
        self.engine_port = engine_port
        self.spark_master = spark_master
        self.kinds = ENGINE_KINDS if engine_port is not None else KINDS
        self.rng = random.Random(seed)
        self.clean_every = clean_every
        self.log = log
        self.runs = 0
        self.summary = CrashSummary(seed=seed, kills_requested=0)
        # Spark's and Dagster's scratch files: a killed JVM never cleans up after itself.
        self.scratch = work_dir / "scratch"
        self.logs = work_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    @property
    def root(self) -> Path:
        """The lakehouse's root as a local path (a harness on object storage has none)."""
        return self.location.local("the crash harness's local copy of the lakehouse")

    @property
    def on_store(self) -> bool:
        return not self.location.is_local

    # -- the campaign ----------------------------------------------------------------------------
    def campaign(self, kills: int) -> CrashSummary:
        """Kill ``kills`` runs, cycling through the fault points and random moments, then
        finish with a clean run and the full invariants."""
        summary = self.summary
        summary.kills_requested = kills
        started = time.monotonic()
        self.land_some(files=2)
        # Up to three tries per kill: a hit beyond what a run reaches lets the run finish. The
        # kind follows the kills, not the attempts, so a point that a run outlived is tried
        # again (with new data landed, so every table has work and reaches the point) rather
        # than skipped: every kind gets its kill.
        # A run with new data that outlives hit h of a point reaches it fewer than h times,
        # so later hits are drawn below h: the schedule follows what runs reach today
        # rather than spending runs on hits they no longer make.
        outlived = False
        while summary.kills < kills and summary.attempts < 3 * kills:
            kind = self.kinds[summary.kills % len(self.kinds)]
            summary.attempts += 1
            landed = outlived or self.rng.random() < 0.7
            if landed:
                self.land_some(files=1)
            if kind in (RANDOM_KILL, ENGINE_KILL):
                outcome = self.run_child(kind, delay=self.rng.uniform(1.0, self._typical_run_seconds()))
            else:
                outcome = self.run_child(kind, hit=self.rng.randint(1, summary.reach[kind]))
                if landed and not outcome.killed and outcome.returncode == 0 and outcome.hit:
                    summary.reach[kind] = max(1, min(summary.reach[kind], outcome.hit - 1))
            outlived = not outcome.killed
            if outcome.killed:
                summary.kills += 1
                summary.kills_by_point[kind] += 1
                summary.kills_by_step[f"{kind} @ {outcome.last_step or 'before the first step'}"] += 1
                summary.killed_run_seconds.append(outcome.duration)
                self.check(f"kill {summary.kills} ({self._describe(outcome)})", pending_ok=True)
                if summary.kills % self.clean_every == 0 and summary.kills < kills:
                    self.clean_run(f"clean run after kill {summary.kills}")
            else:
                summary.survived += 1
                if outcome.returncode != 0:
                    self._failed(outcome)
                else:
                    summary.clean_run_seconds.append(outcome.duration)
        self.land_some(files=1)
        self.clean_run("final clean run")
        summary.duration_seconds = time.monotonic() - started
        return summary

    def clean_run(self, label: str, *, checks: bool = True) -> InvariantReport:
        """A run with no fault (without the tables' checks, if not ``checks``), then every
        invariant at full strength."""
        outcome = self.run_child("clean", checks=checks)
        self.summary.clean_runs += 1
        if outcome.returncode != 0:
            self._failed(outcome)
        else:
            self.summary.clean_run_seconds.append(outcome.duration)
        return self.check(label, pending_ok=False)

    # -- the pieces ------------------------------------------------------------------------------
    def land_some(self, files: int) -> None:
        """Land the data set's next ``files`` files (5% bad records) into the landing folder."""
        landing = self.location / "landing" if self.on_store else self.root / "landing"
        landed_files, landed_records = self.source.land(landing, files, self.summary.seed)
        self.summary.landed_files += landed_files
        self.summary.landed_records += landed_records

    def run_child(self, kind: str, *, hit: int | None = None, delay: float | None = None,
                  kill_on_line: str | None = None, kill_on_path: Path | None = None,
                  assets: Sequence[str] = (), checks: bool = True) -> RunOutcome:
        """Run the seeds' graph (or ``assets``; without their checks if not ``checks``) in a child
        process group, and arm ``kind:hit``, or kill after
        ``delay`` seconds, or as soon as its log shows ``kill_on_line`` or the file ``kill_on_path``
        exists, or neither for a clean run. What is killed is the run's process group, or with
        ``kind`` "engine" the engine it is attached to: then the run must fail by itself, naming
        the engine, and the engine is started again, as `lakehouse engine start` would."""
        self.runs += 1
        engine_killed = False
        env = self._child_env()
        if hit is not None:
            env[FAULT_ENV_VAR] = f"{kind}:{hit}"
        log_path = self.logs / f"run-{self.runs:04d}-{kind}.log"
        started = time.monotonic()
        with log_path.open("wb") as log_file:
            child = subprocess.Popen(
                [sys.executable, "-m", "lakehouse_assets_tests.reliability.crash_child",
                 *([] if checks else [WITHOUT_CHECKS]), *(assets or self.source.assets)],
                env=env, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.work_dir, start_new_session=True,
            )
            try:
                try:
                    if kill_on_line is not None:
                        line = kill_on_line
                        _wait_until(child, lambda: line in log_path.read_text(errors="replace"), started)
                    if kill_on_path is not None:
                        _wait_until(child, kill_on_path.exists, started)
                    child.wait(timeout=delay if delay is not None else _CHILD_TIMEOUT_SECONDS)
                except subprocess.TimeoutExpired:
                    if kind != ENGINE_KILL:
                        raise
                    engine_killed = self._kill_engine()
                    child.wait(timeout=_CHILD_TIMEOUT_SECONDS)  # it must end by itself
            except subprocess.TimeoutExpired:
                _kill_group(child.pid)
                child.wait()
            finally:
                # Whatever ended the leader, nothing of its group may outlive it (a JVM
                # still writing would race the next run).
                _kill_group(child.pid)
        duration = time.monotonic() - started
        text = log_path.read_text(errors="replace")
        steps = _STEP_START.findall(text)
        outcome = RunOutcome(kind, hit, delay, child.returncode, duration, steps[-1] if steps else None,
                             str(log_path), engine_killed)
        if engine_killed:
            self._after_engine_kill(outcome, text)
        self.log(f"run {self.runs}: {self._describe(outcome)} -> "
                 f"{'killed' if outcome.killed else f'exit {outcome.returncode}'} after {duration:.1f}s"
                 f" in {outcome.last_step}")
        return outcome

    # -- the engine --------------------------------------------------------------------------------
    @property
    def engine_settings(self) -> LakehouseSettings:
        """The settings the harness's engine starts with: sized like the test session's Spark."""
        if self.engine_port is None:
            raise ValueError("this harness runs embedded: it has no engine")
        env = {**self._root_env, "LAKEHOUSE_ENGINE_PORT": str(self.engine_port),
               "LAKEHOUSE_SPARK_CONF": self._spark_conf()}
        if self.spark_master:
            env["LAKEHOUSE_SPARK_MASTER"] = self.spark_master
        return LakehouseSettings.from_env(env)

    def start_engine(self) -> float:
        """Start the harness's engine (or find it running); the seconds it took."""
        from lakehouse_assets.engine.server import start_engine

        started = time.monotonic()
        start_engine(self.engine_settings, timeout_seconds=180)
        return time.monotonic() - started

    def stop_engine(self) -> None:
        from lakehouse_assets.engine.server import stop_engine

        if self.engine_port is not None:
            stop_engine(self.engine_settings)

    def _kill_engine(self) -> bool:
        """SIGKILL the harness's engine server, as a crash would; whether one was running."""
        from lakehouse_assets_tests.engine.crash import kill_engine

        return kill_engine(self.engine_settings) is not None

    def _after_engine_kill(self, outcome: RunOutcome, log_text: str) -> None:
        """The run must have failed by itself, naming the engine; then bring the engine back."""
        if outcome.returncode == -signal.SIGKILL:
            self.summary.failed_runs.append(f"{self._describe(outcome)}: the run did not end by itself within "
                                            f"{_CHILD_TIMEOUT_SECONDS} s after its engine died (log {outcome.log})")
        elif outcome.returncode != 0 and ENGINE_LOST_MESSAGE not in log_text:
            self.summary.failed_runs.append(f"{self._describe(outcome)}: the run failed without naming its lost "
                                            f"engine (log {outcome.log})")
        self.summary.engine_restart_seconds.append(self.start_engine())

    def check(self, after: str, *, pending_ok: bool) -> InvariantReport:
        report = check_all(LakehouseResource.from_settings(self.settings), pending_ok=pending_ok, flows=self.flows)
        self.summary.checks.append(CheckRecord(after, pending_ok, report.ok, report.summary()))
        if not report.ok:
            self.log(f"INVARIANTS BROKEN after {after}:\n{report.summary()}")
        return report

    def _failed(self, outcome: RunOutcome) -> None:
        # The step that failed and the root causes say more than the traceback's tail.
        lines = Path(outcome.log).read_text(errors="replace").splitlines()
        key = [line[:400] for line in lines if "STEP_FAILURE" in line or line.startswith("Caused by:")][:6]
        text = "\n".join(key or lines[-30:])
        self.summary.failed_runs.append(f"{self._describe(outcome)} exit {outcome.returncode} (log {outcome.log}):\n{text}")
        self.log(f"RUN FAILED: {self._describe(outcome)}, see {outcome.log}")

    def _child_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != FAULT_ENV_VAR}
        tmp = self.scratch / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env.update(self._root_env)
        env.update(
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=os.pathsep.join(p for p in (str(_CHECKOUT), env.get("PYTHONPATH", "")) if p),
            TMPDIR=str(tmp),
            LAKEHOUSE_SPARK_CONF=self._spark_conf(),
            **self.source.environment(),
        )
        if self.engine_port is not None:
            # The harness's own engine (otherwise the runs go where this process's
            # LAKEHOUSE_SPARK_REMOTE says); they read the token from _engine/token (under
            # settings.machine_path()).
            env.update(LAKEHOUSE_ENGINE_PORT=str(self.engine_port),
                       LAKEHOUSE_SPARK_REMOTE=f"sc://localhost:{self.engine_port}")
        return env

    def _spark_conf(self) -> str:
        tmp = self.scratch / "tmp"
        return json.dumps({
            **SMALL_DATA_CONF,
            "spark.driver.extraJavaOptions": f"{TEST_JVM_OPTIONS} -Djava.io.tmpdir={tmp}",
            # A cluster's executors live as long as the run's engine: as short as the driver.
            "spark.executor.extraJavaOptions": archive_options(self.settings, TEST_JVM_OPTIONS),
            "spark.local.dir": str(self.scratch / "spark"),
            # Executors of a cluster run this interpreter too (a local master's inherit it).
            "spark.pyspark.python": sys.executable,
        })

    def _typical_run_seconds(self) -> float:
        runs = self.summary.clean_run_seconds
        return statistics.median(runs) if runs else 30.0

    @staticmethod
    def _describe(outcome: RunOutcome) -> str:
        if outcome.kind == RANDOM_KILL:
            return f"random kill after {outcome.delay:.1f}s" if outcome.delay is not None else "kill on a log line"
        if outcome.kind == ENGINE_KILL:
            return f"engine killed after {outcome.delay:.1f}s" if outcome.delay is not None else "engine killed on a log line"
        if outcome.kind == FILE_KILL:
            return "kill on a file appearing"
        if outcome.kind == "clean":
            return "clean run"
        return f"{FAULT_ENV_VAR}={outcome.kind}:{outcome.hit}"


def _wait_until(child: subprocess.Popen, seen: Callable[[], bool], started: float) -> None:
    """Raise TimeoutExpired as soon as ``seen()`` (the child's log shows a line, a file
    exists), so the caller kills the child; return once the child has ended without it."""
    while child.poll() is None:
        if seen():
            raise subprocess.TimeoutExpired(child.args, time.monotonic() - started)
        if time.monotonic() - started > _CHILD_TIMEOUT_SECONDS:
            return
        time.sleep(0.1)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def announce(line: str) -> None:
    """``line`` straight to the terminal, past pytest's capture: a campaign's seed must be seen
    even when the test passes, so that a campaign that found something can be repeated."""
    print(line, file=sys.__stderr__, flush=True)


def format_summary(summary: CrashSummary) -> str:
    """The campaign as Markdown: kills per point and per step, reruns, invariants, timings."""
    def seconds(values: list[float]) -> str:
        if not values:
            return "-"
        return f"median {statistics.median(values):.1f} s (min {min(values):.1f}, max {max(values):.1f}, n={len(values)})"

    strict = [c for c in summary.checks if not c.pending_ok]
    pending = [c for c in summary.checks if c.pending_ok]
    lines = [
        f"- seed: {summary.seed} (`{SEED_ENV_VAR}={summary.seed}` repeats the schedule)",
        f"- kills: {summary.kills} of {summary.kills_requested} requested, in {summary.attempts} attempts "
        f"({summary.survived} runs outlived their fault and completed)",
        f"- reruns after a kill: {summary.reruns}; clean runs: {summary.clean_runs}",
        f"- landed: {summary.landed_files} files, {summary.landed_records} records (5% bad)",
        f"- failed runs: {len(summary.failed_runs)}",
        f"- invariants after each kill (nothing duplicated or half-written): "
        f"{sum(c.ok for c in pending)}/{len(pending)} held",
        f"- all invariants after a clean run: {sum(c.ok for c in strict)}/{len(strict)} held",
        f"- duration: {summary.duration_seconds / 60:.1f} min; killed runs {seconds(summary.killed_run_seconds)}; "
        f"completed runs {seconds(summary.clean_run_seconds)}",
        *([f"- engine restarts after its kills: {seconds(summary.engine_restart_seconds)}"]
          if summary.engine_restart_seconds else []),
        "- arrivals a run with new data makes at each point, as the campaign learned them: "
        + ", ".join(f"{point} ≤ {n}" for point, n in summary.reach.items() if point in summary.kills_by_point),
        "",
        "| kill point | kills |",
        "|---|---:|",
        *[f"| {kind} | {n} |" for kind, n in sorted(summary.kills_by_point.items())],
        "",
        "| kill point @ step running | kills |",
        "|---|---:|",
        *[f"| {k} | {n} |" for k, n in sorted(summary.kills_by_step.items())],
    ]
    broken = [c for c in summary.checks if not c.ok]
    if broken or summary.failed_runs:
        lines += ["", "## Failures", "", "```", summary.failures(), "```"]
    return "\n".join(lines) + "\n"
