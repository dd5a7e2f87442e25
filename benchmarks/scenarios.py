"""The scenarios: what data each contender gets, in which order the runs happen, and how
each run's time splits into its phases.

Data is landed once per scenario with the project's simulator into ``<scenario>/landing``;
each contender gets its own folder and sees the very same files (hard links), staged file
by file as the scenario goes on. Every run is a fresh child process.

- ``load`` (the scenarios ``initial_load``, ``increment``, ``no_new_data``, ``run_overhead``):
  every contender loads the initial files into an empty folder, ``repeats`` times (the
  order of contenders rotates between repeats); then, on the folders of the last repeat,
  one new file per run (``increment``), then runs with nothing new (``no_new_data``).
  ``run_overhead`` is the split of the one-file increments into their phases.
- ``history``: small files build a history of 10, 100 and 1,000 processed files; after each
  size, one new full-size file per run is timed.
- ``latency``: ``dagster dev`` with its real daemon and default intervals; see
  :mod:`benchmarks.latency`.

Contenders on the warm Spark Connect engine and the resident warm anchor need something that
outlives a run: the engine (one per invocation) and the anchor's long-lived child are started
the first time one of their runs comes up, then warmed up with two untimed runs on a scratch
lakehouse of their own (JVM start and JIT warm-up paid once, as on a warm engine), and stopped
by :meth:`Bench.close`. None of that is in any timed run.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.contenders import (
    ENGINE_URL_ENV,
    PYTHON,
    REPO,
    Contender,
    Workspace,
    all_contenders,
    base_env,
    product_dir,
    stage_files,
)
from benchmarks.engine import EngineFailed, WarmEngine, snapshot
from benchmarks.measure import ChildFailed, ProcessResult, ResidentChild, head_commit, median, run_child, spread

LOAD_SCENARIOS = ("initial_load", "increment", "no_new_data", "run_overhead")
ALL_SCENARIOS = (*LOAD_SCENARIOS, "history", "latency")

#: Untimed runs that warm up the engine and the resident anchor before their timed runs: an
#: initial load, then a one-file increment (each path's classes loaded and JIT-compiled once).
WARMUP_RUNS = 2


@dataclass(frozen=True)
class Plan:
    """How big and how often: the full suite, or the quick one."""

    quick: bool = False
    #: Initial-load runs per contender (the suite's time budget allows two of each).
    repeats: int = 2
    initial_files: int = 20
    records_per_file: int = 5_000
    increments: int = 2
    no_data_runs: int = 2
    history_sizes: tuple[int, ...] = (10, 100, 1_000)
    history_records_per_file: int = 10
    #: Timed one-file increments per history size: lakehouse_assets (whose target it is), others.
    history_increments: int = 1
    history_increments_others: int = 1
    latency_samples: int = 5
    #: Samples taken even when the time budget says stop (see Bench.deadline).
    latency_min_samples: int = 3
    latency_warmup_files: int = 1
    #: Share of bad records in the landed files (malformed, wrong types, heartrate <= 0,
    #: unknown patients), as in the reference data set: what the quarantine and checks are for.
    bad_rate: float = 0.01
    seed: int = 7
    load_contenders: tuple[str, ...] = (
        "lakehouse_assets", "lakehouse_assets_connect", "lakehouse_assets+checks", "plain_streaming",
        "plain_streaming_warm", "plain_streaming_parquet", "plain_batch", "sdp",
    )
    #: Contenders of the one-file increments and the runs with nothing new. plain_batch keeps
    #: no state (its "increment" is its initial load again), and the checks' target is the
    #: initial load's.
    increment_contenders: tuple[str, ...] = (
        "lakehouse_assets", "lakehouse_assets_connect", "plain_streaming", "plain_streaming_warm",
        "plain_streaming_parquet", "sdp",
    )
    anchors: tuple[str, ...] = ("spark_start", "spark_trivial")
    cli: bool = True
    #: SDP's runs (a second JVM each) do not fit the 30-minute budget in this scenario too;
    #: ``--scenarios history --contenders sdp`` measures it on its own.
    history_contenders: tuple[str, ...] = ("lakehouse_assets", "lakehouse_assets_connect", "plain_streaming")
    #: Contenders of the runs with nothing new: its target is a ratio to the anchors (measured
    #: in the initial load), plain Structured Streaming (cold and warm) is the context; on the
    #: engine the target is seconds.
    no_data_contenders: tuple[str, ...] = (
        "lakehouse_assets", "lakehouse_assets_connect", "plain_streaming", "plain_streaming_warm",
        "plain_streaming_parquet",
    )
    #: Contenders of the lists above that run only when named (``--contenders``): the
    #: Parquet-only script tells Delta Lake's own price, no target's reference.
    opt_in: tuple[str, ...] = ("plain_streaming_parquet",)

    @classmethod
    def full(cls, repeats: int | None = None) -> Plan:
        return cls() if repeats is None else cls(repeats=repeats, increments=min(repeats, 2), no_data_runs=min(repeats, 2))

    #: Scenarios run by default: everything in the full suite; the quick one leaves out the
    #: history (four more runs) and the latency (dagster dev), to stay under 5 minutes.
    @property
    def default_scenarios(self) -> tuple[str, ...]:
        return LOAD_SCENARIOS if self.quick else ALL_SCENARIOS

    def estimate_seconds(self) -> int:
        """A rough duration on this 2-core machine (seconds per whole run, as measured on
        2026-11-21), to keep the full suite under 30 minutes and the quick one under 5."""
        cost = {"lakehouse_assets": 45, "lakehouse_assets+checks": 55, "plain_streaming": 25, "plain_batch": 22,
                "sdp": 40, "spark_start": 10, "spark_trivial": 14, "lakehouse_assets_cli": 50,
                "lakehouse_assets_connect": 12, "plain_streaming_warm": 6, "plain_streaming_parquet": 22}
        cost.update({c: 0 for c in self.opt_in})  # not run unless named
        # Once: the engine's start and warm-up, the warm anchor's (guesses for an idle machine).
        once = {"lakehouse_assets_connect": 60, "plain_streaming_warm": 30}
        total = sum(once.get(c, 0) for c in self.load_contenders)
        total += self.repeats * sum(cost[c] for c in (*self.load_contenders, *self.anchors))
        inc = [c for c in self.increment_contenders if c in self.load_contenders]
        total += self.increments * sum(cost[c] for c in inc)
        total += self.no_data_runs * sum(int(cost[c] * 0.7) for c in self.no_data_contenders)  # nothing to read
        total += cost["lakehouse_assets_cli"] if self.cli else 0
        for c in self.history_contenders if "history" in self.default_scenarios else ():
            n = self.history_increments if c == "lakehouse_assets" else self.history_increments_others
            total += len(self.history_sizes) * (n + 1) * cost[c]
            total += 30 if max(self.history_sizes) >= 1_000 else 0  # processing the long history
        if "latency" in self.default_scenarios:
            total += 150 + self.latency_samples * 90  # dagster dev, warm-up, samples
            if "lakehouse_assets_connect" in self.load_contenders:
                total += 90 + self.latency_samples * 25  # the same on the warm engine
        return total

    @classmethod
    def quick_plan(cls, repeats: int | None = None) -> Plan:
        r = repeats or 1
        return cls(
            quick=True, repeats=r, initial_files=4, records_per_file=1_000, increments=r, no_data_runs=r,
            history_sizes=(3, 12), history_increments=1, history_increments_others=1,
            latency_samples=1, latency_min_samples=1, latency_warmup_files=1,
            # SDP starts a second JVM (its Connect server) per run: the full suite has it.
            load_contenders=("lakehouse_assets", "lakehouse_assets_connect", "plain_streaming", "plain_streaming_warm",
                             "plain_streaming_parquet"),
            increment_contenders=("lakehouse_assets", "lakehouse_assets_connect", "plain_streaming", "plain_streaming_warm",
                                  "plain_streaming_parquet"),
            no_data_contenders=("lakehouse_assets", "lakehouse_assets_connect"),
            anchors=("spark_trivial",), cli=False,
            history_contenders=("lakehouse_assets", "lakehouse_assets_connect"),
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Bench:
    """One invocation: where it works, what it runs, and everything measured so far."""

    plan: Plan
    workdir: Path
    only: Sequence[str] | None = None  # contender names to keep (None: all in the plan)
    log: Callable[[str], None] = print
    results: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    #: ``time.monotonic()`` by which the suite must be done (None: no limit). Only the latency
    #: samples, last, adapt to it: they stop early (never below the plan's minimum) rather
    #: than run past it.
    deadline: float | None = None

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def __post_init__(self) -> None:
        self.contenders = all_contenders()
        self.broken: dict[Workspace, str] = {}  # a folder whose run failed: later runs on it are skipped
        self._engine: WarmEngine | None = None
        self._engine_error: str | None = None
        self._residents: dict[str, ResidentChild] = {}
        self._warmed: set[str] = set()

    def wanted(self, names: Sequence[str]) -> list[Contender]:
        if self.only is None:
            keep = [n for n in names if n not in self.plan.opt_in]
        else:
            keep = [n for n in names if n in self.only]
        if not self.facts.get("checks_defined") and "lakehouse_assets+checks" in keep:
            keep.remove("lakehouse_assets+checks")
        return [self.contenders[n] for n in keep]

    def workspace(self, scenario: str, contender: Contender, tag: str = "") -> Workspace:
        ws = Workspace(self.workdir / scenario / "contenders" / f"{contender.name}{tag}")
        ws.reset()
        self.broken.pop(ws, None)
        contender.prepare(ws)
        return ws

    def run(self, contender: Contender, ws: Workspace, label: str) -> dict[str, Any]:
        if ws in self.broken:
            return {"contender": contender.name, "label": label, "error": f"skipped: {self.broken[ws]} failed earlier"}
        log_path = ws.logs / f"{label}.log"
        try:
            self.ready(contender)
            self.log(f"  {contender.name:<24} {label:<28} ...")
            result = self._execute(contender, ws, log_path)
        except (ChildFailed, EngineFailed) as exc:
            self.log(f"  FAILED: {exc}")
            self.broken[ws] = label
            return {"contender": contender.name, "label": label, "error": str(exc)[-2_000:], "log": str(log_path)}
        record = {"contender": contender.name, "label": label, **result.as_dict()}
        record["split"] = split(contender, result, ws)
        self.log(f"  {contender.name:<24} {label:<28} {result.wall_seconds:7.2f} s  peak {result.peak_rss_bytes / 2**30:5.2f} GiB")
        return record

    def _execute(self, contender: Contender, ws: Workspace, log_path: Path) -> ProcessResult:
        """One run: a request to the contender's resident child, or a fresh child process
        (whose memory counts the engine's processes too when it runs on the engine)."""
        if contender.resident:
            return self._residents[contender.name].request(
                contender.request(ws), phases_path=log_path.with_suffix(".phases.json"), timeout_seconds=1_200)
        argv, env, cwd = contender.command(ws)
        extra_roots = self._engine.pids if contender.on_engine and self._engine is not None else None
        return run_child(argv, env=env, cwd=cwd or product_dir(), log_path=log_path, timeout_seconds=1_200,
                         extra_roots=extra_roots)

    # -- what outlives a run: the warm engine and the resident anchor --------------------------------

    def ready(self, contender: Contender) -> None:
        """Start what the contender's runs need and warm it up, the first time (untimed)."""
        if contender.on_engine:
            self.engine()
        if contender.resident and not (contender.name in self._residents and self._residents[contender.name].running):
            self._start_resident(contender)
        if (contender.on_engine or contender.resident) and contender.name not in self._warmed:
            self._warmed.add(contender.name)
            self._warm_up(contender)

    def engine(self) -> WarmEngine:
        """The invocation's warm Spark Connect engine, started on first use; raises
        :class:`EngineFailed` (then and on every later call) when it cannot start."""
        if self._engine is not None:
            return self._engine
        if self._engine_error is not None:
            raise EngineFailed(self._engine_error)
        engine = WarmEngine(root=self.workdir / "engine")
        self.log(f"engine: starting a Spark Connect engine on 127.0.0.1:{engine.port} (not timed)")
        try:
            seconds = engine.start()
        except (EngineFailed, ImportError, OSError) as exc:
            self._engine_error = f"the warm engine did not start: {exc}"
            self.log("  " + self._engine_error)
            raise EngineFailed(self._engine_error) from exc
        self._engine = engine
        os.environ[ENGINE_URL_ENV] = engine.url()  # for the contenders' commands, never logged
        self.results.setdefault("engine", {}).update(
            {"port": engine.port, "start_seconds": round(seconds, 2), "after_start": snapshot(engine)})
        self.log(f"  engine answers after {seconds:.1f} s")
        return engine

    def _start_resident(self, contender: Contender) -> None:
        argv, env = contender.server_command()
        log_path = self.workdir / "resident" / f"{contender.name}.log"
        child = ResidentChild(argv, env=env, cwd=product_dir(), log_path=log_path)
        self.log(f"{contender.name}: starting its long-lived session (not timed)")
        seconds = child.start()
        self._residents[contender.name] = child
        self.results.setdefault("resident", {}).setdefault(contender.name, {}).setdefault("starts", []).append(
            {"start_seconds": round(seconds, 2), "log": str(log_path)})
        self.log(f"  ready after {seconds:.1f} s")

    def _warm_up(self, contender: Contender) -> None:
        """Untimed runs on a scratch lakehouse: an initial load, then one-file increments."""
        ws = Workspace(self.workdir / "warmup" / contender.name)
        ws.reset()
        contender.prepare(ws)
        runs: list[dict[str, Any]] = []
        for i in range(WARMUP_RUNS):
            land_files(ws.landing, self.plan, [(1, self.plan.records_per_file)])
            log_path = ws.logs / f"warmup_{i + 1}.log"
            try:
                result = self._execute(contender, ws, log_path)
            except ChildFailed as exc:
                self.log(f"  warm-up of {contender.name} FAILED: {exc}")
                runs.append({"error": str(exc)[-2_000:], "log": str(log_path)})
                break
            runs.append({"wall_seconds": round(result.wall_seconds, 2), "peak_rss_mib": round(result.peak_rss_bytes / 2**20)})
            self.log(f"  {contender.name:<24} warm-up {i + 1} (not timed) {result.wall_seconds:7.2f} s")
        self.results.setdefault("warmup", {})[contender.name] = runs
        if contender.on_engine and self._engine is not None:
            self.results["engine"]["after_warmup"] = snapshot(self._engine)

    def close(self) -> None:
        """Stop the resident children and the engine (and everything it started). Safe to
        call more than once, and after a failure or Ctrl-C."""
        for child in self._residents.values():
            child.stop()
        self._residents.clear()
        engine, self._engine = self._engine, None
        os.environ.pop(ENGINE_URL_ENV, None)
        if engine is None:
            return
        try:
            self.results.setdefault("engine", {})["at_end"] = snapshot(engine)
        finally:
            engine.stop()
            self.log(f"engine: stopped (port {engine.port})")


# -- facts about the product ------------------------------------------------------------------------


def probe_product(log: Callable[[str], None] = print) -> dict[str, Any]:
    """What the project's Definitions hold right now: assets, checks, quarantine assets."""
    code = (
        "import json\n"
        "from lakehouse_assets.definitions import defs\n"
        "g = defs.resolve_asset_graph()\n"
        "keys = [k.to_user_string() for k in g.get_all_asset_keys()]\n"
        "checks = [f'{c.asset_key.to_user_string()}:{c.name}' for c in g.asset_check_keys]\n"
        "print(json.dumps({'assets': sorted(keys), 'checks': sorted(checks),"
        " 'quarantine_assets': sorted(k for k in keys if 'quarantine' in k)}))\n"
    )
    try:
        out = subprocess.run([PYTHON, "-c", code], env=base_env(), cwd=product_dir(), capture_output=True, text=True, timeout=300)
        facts = json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        log(f"could not read the project's Definitions: {exc}")
        facts = {"assets": [], "checks": [], "quarantine_assets": [], "error": str(exc)}
    facts["checks_defined"] = len(facts.get("checks", []))
    return facts


# -- landing the data ---------------------------------------------------------------------------------


def land_files(landing: Path, plan: Plan, groups: Sequence[tuple[int, int]]) -> list[str]:
    """Land ``(files, records_per_file)`` groups one after the other; the file names in order."""
    from lakehouse_assets.simulator import land

    names: list[str] = []
    for files, records in groups:
        if files <= 0:
            continue
        result = land(landing, files=files, records_per_file=records, bad_rate=plan.bad_rate, seed=plan.seed)
        names.extend(path.name for path in result.paths)
    return names


# -- the load group: initial load, increments, nothing new ------------------------------------------


def run_load(bench: Bench, scenarios: Sequence[str]) -> None:
    plan = bench.plan
    base = bench.workdir / "load"
    landing = base / "landing"
    names = land_files(landing, plan, [(plan.initial_files + plan.increments + 1, plan.records_per_file)])
    initial, extra = names[: plan.initial_files], names[plan.initial_files:]
    contenders = bench.wanted(plan.load_contenders)
    anchors = bench.wanted(plan.anchors)
    cli = bench.wanted(["lakehouse_assets_cli"]) if plan.cli else []
    timed_initial = "initial_load" in scenarios
    repeats = plan.repeats if timed_initial else 1
    records = plan.initial_files * plan.records_per_file
    bench.log(f"load: {plan.initial_files} files x {plan.records_per_file} records, {repeats} repeat(s)")

    initial_runs: dict[str, list[dict[str, Any]]] = {c.name: [] for c in contenders + anchors + cli}
    anchor_names = {a.name for a in anchors}
    last_ws: dict[str, Workspace] = {}
    for repeat in range(repeats):
        order = _rotate(contenders + anchors, repeat)
        for contender in order:
            ws = bench.workspace("load", contender, "")
            stage_files(landing, ws, initial)
            record = bench.run(contender, ws, f"initial_r{repeat + 1}")
            initial_runs[contender.name].append(record)
            last_ws[contender.name] = ws
    bench.results["initial_load"] = {
        "files": plan.initial_files, "records_per_file": plan.records_per_file, "records": records,
        "contenders": {name: summarize(runs, records=None if name in anchor_names else records)
                       for name, runs in initial_runs.items() if runs},
    }

    increment_runs: dict[str, list[dict[str, Any]]] = {c.name: [] for c in contenders + cli if c in cli or c.name in plan.increment_contenders}
    followers = [c for c in contenders if c.name in plan.increment_contenders]
    if {"increment", "run_overhead"} & set(scenarios):
        for i in range(plan.increments):
            for contender in _rotate(followers, i):
                ws = last_ws[contender.name]
                stage_files(landing, ws, initial + extra[: i + 1])
                increment_runs[contender.name].append(bench.run(contender, ws, f"increment_{i + 1}"))
        # Once through `dagster asset materialize` (code loading, instance and run creation
        # included): one more file on the in-process lakehouse, after its own increments.
        for contender in cli:
            ws = last_ws.get("lakehouse_assets") or bench.workspace("load", contender, "")
            stage_files(landing, ws, initial + extra[: plan.increments + 1])
            increment_runs[contender.name].append(bench.run(contender, ws, "increment_cli"))
        bench.results["increment"] = {
            "records_per_file": plan.records_per_file, "history_files": plan.initial_files,
            "contenders": {n: summarize(r, records=plan.records_per_file) for n, r in increment_runs.items() if r},
        }
        # Anchors: a bare start, and a start plus one trivial job, in this same invocation.
        bench.results["increment"]["anchors"] = {n: initial_runs[n] and summarize(initial_runs[n]) for n in (a.name for a in anchors)}

    if "no_new_data" in scenarios:
        # The anchors are the initial load's runs of them, a few minutes earlier in this same
        # invocation (running them again cost a minute of the 30-minute budget).
        idle = [c for c in contenders if c.name in plan.no_data_contenders]
        no_data_runs: dict[str, list[dict[str, Any]]] = {c.name: [] for c in idle}
        for i in range(plan.no_data_runs):
            for contender in _rotate(idle, i):
                ws = last_ws.get(contender.name) or bench.workspace("load", contender, "")
                no_data_runs[contender.name].append(bench.run(contender, ws, f"no_new_data_{i + 1}"))
        bench.results["no_new_data"] = {
            "contenders": {n: summarize(r) for n, r in no_data_runs.items() if r},
            "anchors": {n: summarize(initial_runs[n]) for n in anchor_names if initial_runs.get(n)},
        }

    if "run_overhead" in scenarios:
        bench.results["run_overhead"] = overhead_table(increment_runs, initial_runs, [a.name for a in anchors])


def _rotate(items: Sequence[Contender], by: int) -> list[Contender]:
    items = list(items)
    if not items:
        return items
    k = by % len(items)
    return items[k:] + items[:k]


# -- the history scenario ---------------------------------------------------------------------------


def run_history(bench: Bench) -> None:
    plan = bench.plan
    base = bench.workdir / "history"
    landing = base / "landing"
    sizes = plan.history_sizes
    r = max(plan.history_increments, plan.history_increments_others)
    groups: list[tuple[int, int]] = []
    processed = 0
    for size in sizes:
        if size <= processed:
            raise ValueError(f"history sizes {sizes} must grow by more than {r} files each")
        groups += [(size - processed, plan.history_records_per_file), (r, plan.records_per_file)]
        processed = size + r
    names = land_files(landing, plan, groups)
    # Where each size's timed files start in the landing order: after exactly `size` files.
    starts, position = [], 0
    for (small, _), (big, _) in zip(groups[::2], groups[1::2], strict=True):
        position += small
        starts.append(position)
        position += big
    bench.log(f"history: sizes {sizes}, small files of {plan.history_records_per_file} records, "
              f"increments of {plan.records_per_file} records")
    results: dict[str, Any] = {}
    for contender in bench.wanted(plan.history_contenders):
        increments = plan.history_increments if contender.name == "lakehouse_assets" else plan.history_increments_others
        ws = bench.workspace("history", contender, "")
        per_size: dict[str, Any] = {}
        for size, start in zip(sizes, starts, strict=True):
            # Everything landed before this size's timed files (small files, and the timed
            # files of earlier sizes this contender did not time) is processed in one run.
            stage_files(landing, ws, names[:start])
            history_run = bench.run(contender, ws, f"history_{size}")
            runs = []
            for j in range(increments):
                stage_files(landing, ws, names[: start + j + 1])
                runs.append(bench.run(contender, ws, f"history_{size}_increment_{j + 1}"))
            per_size[str(size)] = {"history_run": history_run, **summarize(runs, records=plan.records_per_file)}
        results[contender.name] = per_size
    bench.results["history"] = {
        "sizes": list(sizes), "history_records_per_file": plan.history_records_per_file,
        "increment_records": plan.records_per_file, "contenders": results,
    }


# -- summaries and splits -------------------------------------------------------------------------------


def summarize(runs: Sequence[dict[str, Any]], *, records: int | None = None) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    walls = [r["wall_seconds"] for r in ok]
    rss = [r["peak_rss_mib"] for r in ok]
    out: dict[str, Any] = {
        "median_seconds": _round(median(walls)),
        "spread_seconds": spread(walls),
        "median_peak_rss_mib": _round(median(rss)),
        "max_peak_rss_mib": _round(max(rss)) if rss else None,
        "max_peak_pss_mib": _round(max((r.get("peak_pss_mib") or 0) for r in ok)) if ok else None,
        "failures": len(runs) - len(ok),
        "runs": list(runs),
    }
    if records and out["median_seconds"]:
        out["records_per_second"] = round(records / out["median_seconds"])
    splits = [r.get("split") or {} for r in ok]
    keys = sorted({k for s in splits for k, v in s.items() if isinstance(v, (int, float))})
    out["median_split"] = {k: _round(median([s[k] for s in splits if isinstance(s.get(k), (int, float))])) for k in keys}
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def split(contender: Contender, result: ProcessResult, ws: Workspace) -> dict[str, Any]:
    """Where one run's wall time went, in seconds, from its own marks."""
    if contender.name == "sdp":
        from benchmarks.contenders.sdp import phases_from_log

        result.phases = phases_from_log(result.log_path)
    if contender.name == "lakehouse_assets_cli":
        result.phases = {"marks": {}, "values": {"timeline": cli_timeline(ws)}}
    marks = result.phases.get("marks", {})
    values = result.phases.get("values", {})
    start, end = result.started_at, result.ended_at
    out: dict[str, Any] = {}

    def between(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(b - a, 3)

    if contender.name == "sdp":
        out["jvm_and_connect_server_start"] = between(start, marks.get("session_started"))
        out["graph_and_definitions"] = between(marks.get("session_started"), marks.get("definitions_registered"))
        out["run_start_to_first_flow"] = between(marks.get("definitions_registered"), marks.get("recordings_bronze_starting"))
        out["flows"] = between(marks.get("recordings_bronze_starting"), marks.get("run_completed"))
        out["teardown_and_exit"] = between(marks.get("run_completed"), end)
        return {k: v for k, v in out.items() if v is not None}
    if contender.name == "lakehouse_assets_cli":
        timeline = values.get("timeline") or {}
        run = timeline.get("run", {})
        out["process_start_to_run_start"] = between(start, run.get("start"))
        out["dagster_run"] = between(run.get("start"), run.get("end"))
        steps = timeline.get("steps", {})
        out["steps"] = round(sum((s["end"] - s["start"]) for s in steps.values() if "end" in s and "start" in s), 3)
        io = sum((m.get("duration_seconds") or 0) for m in timeline.get("materializations", {}).values())
        out["io_manager_writes"] = round(io, 3)
        out["run_end_to_exit"] = between(run.get("end"), end)
        out["detail"] = timeline
        return out
    out["python_start_and_imports"] = between(start, marks.get("imported"))
    out["spark_session_start"] = between(marks.get("imported"), marks.get("session_started"))
    work_end = marks.get("materialize_end") or marks.get("gold_done") or marks.get("job_done") or marks.get("session_started")
    if "materialize_start" in marks:
        materialize = between(marks["materialize_start"], marks.get("materialize_end"))
        io = values.get("io_seconds", {})
        query_work = round(sum(io.values()), 3) if io else None
        out["before_materialize"] = between(marks.get("session_started"), marks["materialize_start"])
        out["dagster_materialize"] = materialize
        out["query_work_io_manager"] = query_work
        if materialize is not None and query_work is not None:
            out["dagster_overhead"] = round(materialize - query_work, 3)
        steps = [v for v in ((values.get("timeline") or {}).get("steps") or {}).values() if "start" in v and "end" in v]
        if steps and materialize is not None:
            out["dagster_run_start"] = round(min(v["start"] for v in steps) - marks["materialize_start"], 3)
            out["dagster_run_end"] = round(marks["materialize_end"] - max(v["end"] for v in steps), 3)
            if query_work is not None:
                out["dagster_in_steps"] = round(sum(v["end"] - v["start"] for v in steps) - query_work, 3)
        checks = (values.get("timeline") or {}).get("checks") or {}
        if checks:
            out["checks_evaluated"] = len(checks)
            out["checks_failed"] = sum(1 for passed in checks.values() if not passed)
        out["detail"] = {k: values[k] for k in ("io_seconds", "queries", "profile", "timeline", "selection") if k in values}
    else:
        out["query_work"] = between(marks.get("session_started"), work_end)
        for hop, (a, b) in {"bronze": ("session_started", "bronze_done"), "silver": ("bronze_done", "silver_done"),
                            "gold": ("silver_done", "gold_done")}.items():
            if b in marks:
                out[f"query_{hop}"] = between(marks.get(a), marks.get(b))
        if "queries" in values:
            out["detail"] = {"queries": values["queries"]}
    out["teardown_and_exit"] = between(work_end, end)
    return {k: v for k, v in out.items() if v is not None}


def cli_timeline(ws: Workspace) -> dict[str, Any]:
    """The last run in the contender's Dagster home, read back by a helper process."""
    from benchmarks.contenders.lakehouse_assets import dagster_home

    env = base_env(LAKEHOUSE_ROOT=str(ws.root), DAGSTER_HOME=str(dagster_home(ws)))
    try:
        out = subprocess.run(
            [PYTHON, "-m", "benchmarks.contenders.lakehouse_assets", "timeline"],
            env=env, cwd=product_dir(), capture_output=True, text=True, timeout=300,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        return {"error": str(exc)}


def overhead_table(increments: dict[str, list[dict[str, Any]]], initial: dict[str, list[dict[str, Any]]],
                   anchors: Sequence[str]) -> dict[str, Any]:
    """Run overhead of a one-file increment: the median of each phase, per contender."""
    table: dict[str, Any] = {}
    for name, runs in increments.items():
        if runs:
            table[name] = summarize(runs)["median_split"] | {"wall": summarize(runs)["median_seconds"]}
    for name in anchors:
        if initial.get(name):
            table[name] = summarize(initial[name])["median_split"] | {"wall": summarize(initial[name])["median_seconds"]}
    return {"contenders": table}


def machine_facts() -> dict[str, Any]:
    """The machine, and which code of the product was measured."""
    facts: dict[str, Any] = {"cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg()}
    try:
        with open("/proc/meminfo") as handle:
            facts["mem_total_gib"] = round(int(handle.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    facts["git_commit"] = head_commit(REPO)
    facts["started"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return facts
