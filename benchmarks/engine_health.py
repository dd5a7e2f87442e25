"""Does a long-lived Spark Connect engine stay healthy? One engine, many one-file increments.

    python -m benchmarks.engine_health --increments 200     # make bench-engine-health
    python -m benchmarks.engine_health --increments 5       # a quick look

Starts one managed engine (``lakehouse engine start``, default settings, a free loopback port,
its temp files confined to a folder of its own so they can be counted), lands one file, runs
the reference pipeline once (the initial load), then lands one file and runs bronze -> silver
-> gold again, ``--increments`` times. Each run is a fresh process: the product's in-process
contender (``python -m benchmarks.contenders.lakehouse_assets run``), i.e. a ``dagster.materialize``
of the pipeline on a persistent Dagster instance, attached to the engine through
``LAKEHOUSE_SPARK_REMOTE`` (its own session, released when the run ends).

After each increment it records the run's wall time and peak memory (the run and the engine
together), and what the engine holds: memory of its JVM and of its Python workers (RSS and
PSS), the JVM's threads and live streaming queries, the engine's live processes, the files in
its temp folder, its log's size, and its sessions (from its log); every ``--heap-every``
increments, the JVM's heap after a full GC (``jcmd``, when the JDK has it). Then least-squares
slopes after the warm-up say whether anything grows: MiB, threads, processes, files per 100
increments. The engine is stopped at the end, also on Ctrl-C or failure.

Writes ``benchmarks/results/engine_health.{json,md}`` (rewritten every 10 increments, so an
interrupted run still leaves what it measured). About 10 s per increment on an idle 2-core
machine: 200 increments take some 35-40 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
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
)
from benchmarks.engine import EngineFailed, WarmEngine, snapshot
from benchmarks.measure import ChildFailed, median, run_child
from benchmarks.scenarios import Plan, land_files, machine_facts

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_WORKDIR = Path(__file__).resolve().parent / ".work" / "engine_health"
SAVE_EVERY = 10
MAX_CONSECUTIVE_FAILURES = 3
RUN_TIMEOUT_SECONDS = 900

#: What "grows" means, per 100 increments after the warm-up (least-squares slope). Memory
#: thresholds are loose on purpose: a JVM's RSS creeps while its heap settles.
GROWTH_LIMITS = {
    "heap_used_mib": 10.0,
    "total_pss_mib": 50.0,
    "total_rss_mib": 50.0,
    "jvm_threads": 1.0,
    "processes": 1.0,
    "temp_files": 1.0,
}
SLOPE_SERIES = ("total_rss_mib", "total_pss_mib", "jvm_rss_mib", "jvm_pss_mib", "workers_rss_mib", "workers_pss_mib",
                "heap_used_mib", "jvm_threads", "processes", "python_workers", "temp_files", "temp_mib", "log_mib",
                "wall_seconds")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine_health", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--increments", type=int, default=200, help="one-file increments after the initial load (default 200)")
    parser.add_argument("--records-per-file", type=int, default=5_000, help="records per landed file (default 5000)")
    parser.add_argument("--warmup", type=int, default=20,
                        help="increments left out of the slopes (default 20; at most half of --increments)")
    parser.add_argument("--heap-every", type=int, default=10,
                        help="measure the JVM's heap after a full GC every this many increments (default 10; 0: never)")
    parser.add_argument("--checks", action="store_true", help="run the asset checks in each increment too")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="where data and logs go (emptied first)")
    parser.add_argument("--output", default="engine_health", help="results file stem (default engine_health)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder afterwards")
    return parser.parse_args(argv)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupted)  # so the engine is stopped too
    args = parse_args(argv)
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {message}", flush=True)

    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    contender = _contender(args.checks)
    doc: dict[str, Any] = {"meta": {**machine_facts(), "args": {k: str(v) for k, v in vars(args).items()},
                                    "mode": _mode(contender)},
                           "engine": {}, "initial": None, "increments": []}
    paths = (RESULTS / f"{args.output}.json", RESULTS / f"{args.output}.md")
    engine = WarmEngine(root=args.workdir / "engine", temp_dir=args.workdir / "engine_tmp")
    try:
        log(f"engine: starting on 127.0.0.1:{engine.port}")
        doc["engine"]["start_seconds"] = round(engine.start(), 2)
        doc["engine"]["port"] = engine.port
        os.environ[ENGINE_URL_ENV] = engine.url()  # for the contender's command; never written out
        log(f"  answers after {doc['engine']['start_seconds']} s")
        ws = Workspace(args.workdir / "lakehouse")
        carry_increments(engine, contender, ws, args, doc, log, save=lambda: write(doc, args, *paths))
        doc["verify"] = verify(ws.root)
        log(f"verify: {'every invariant holds' if doc['verify'].get('ok') else doc['verify']}")
    except EngineFailed as exc:
        doc["error"] = str(exc)
        log(f"FAILED: {exc}")
    finally:
        try:
            if engine.pids():
                doc["engine"]["at_end"] = snapshot(engine, heap=True, full_gc=True)
        finally:
            engine.stop()
            os.environ.pop(ENGINE_URL_ENV, None)
            log("engine: stopped")
            doc["meta"]["duration_seconds"] = round(time.monotonic() - started, 1)
            write(doc, args, *paths)
            if not args.keep:
                shutil.rmtree(args.workdir, ignore_errors=True)
    log(f"done in {(time.monotonic() - started) / 60:.1f} min: {paths[0]} and .md")
    return 0 if not doc.get("error") and (doc.get("verify") or {}).get("ok", False) else 1


def _contender(checks: bool) -> Contender:
    base = all_contenders()["lakehouse_assets_connect"]
    if not checks:
        return base
    return Contender(f"{base.name}+checks", f"{base.label}, with quality checks", base.module,
                     {**base.options, "checks": "on"})


def _mode(contender: Contender) -> str:
    checks = "with" if contender.options.get("checks") == "on" else "without"
    return ("each increment a fresh process (`python -m benchmarks.contenders.lakehouse_assets run`): a "
            f"`dagster.materialize` of the reference pipeline, {checks} its asset checks, on a persistent Dagster "
            "instance, attached to the engine through LAKEHOUSE_SPARK_REMOTE (a session of its own, released at "
            "the run's end)")


def carry_increments(engine: WarmEngine, contender: Contender, ws: Workspace, args: argparse.Namespace,
                     doc: dict[str, Any], log: Callable[[str], None], save: Callable[[], None]) -> None:
    """The initial load, then ``args.increments`` one-file increments into ``ws``, each followed
    by a look at the engine; failures are recorded, and three in a row stop it."""
    ws.reset()
    contender.prepare(ws)
    plan = Plan(records_per_file=args.records_per_file)
    doc["engine"]["after_start"] = snapshot(engine, heap=True)
    doc["initial"] = one_run(engine, contender, ws, plan, "initial", heap=True)
    log(f"initial load: {_describe(doc['initial'])}")
    failures = 0
    for i in range(1, args.increments + 1):
        heap = bool(args.heap_every) and (i % args.heap_every == 0 or i == args.increments)
        record = one_run(engine, contender, ws, plan, f"increment_{i:04d}", heap=heap)
        record["increment"] = i
        doc["increments"].append(record)
        log(f"increment {i}/{args.increments}: {_describe(record)}")
        failures = failures + 1 if "error" in record else 0
        if failures >= MAX_CONSECUTIVE_FAILURES:
            doc["error"] = f"{failures} increments in a row failed; stopped at increment {i}"
            log(doc["error"])
            break
        if i % SAVE_EVERY == 0:
            save()


def one_run(engine: WarmEngine, contender: Contender, ws: Workspace, plan: Plan, label: str, *, heap: bool) -> dict[str, Any]:
    """Land one file, run the pipeline on the engine, then look at the engine."""
    land_files(ws.landing, plan, [(1, plan.records_per_file)])
    argv, env, cwd = contender.command(ws)
    record: dict[str, Any] = {"label": label}
    try:
        result = run_child(argv, env=env, cwd=cwd or product_dir(), log_path=ws.logs / f"{label}.log",
                           timeout_seconds=RUN_TIMEOUT_SECONDS, extra_roots=engine.pids)
    except ChildFailed as exc:
        record["error"] = str(exc)[-2_000:]
    else:
        record.update({"wall_seconds": round(result.wall_seconds, 3), "run_and_engine_peak_rss_mib": round(result.peak_rss_bytes / 2**20, 1),
                       "run_and_engine_peak_pss_mib": round(result.peak_pss_bytes / 2**20, 1),
                       "bronze_rows": _bronze_rows(result.phases)})
        (ws.logs / f"{label}.log").unlink(missing_ok=True)  # 200 logs add up; failures keep theirs
    record["engine"] = snapshot(engine, heap=heap, full_gc=heap)
    return record


def _bronze_rows(phases: dict[str, Any]) -> Any:
    materializations = ((phases.get("values") or {}).get("timeline") or {}).get("materializations") or {}
    return (materializations.get("bronze/recordings") or {}).get("rows_processed")


def _describe(record: dict[str, Any]) -> str:
    if "error" in record:
        return "FAILED: " + record["error"].splitlines()[0][:300]
    e = record["engine"]
    heap = f", heap {e['heap_used_mib']} MiB" if e.get("heap_used_mib") is not None else ""
    return (f"{record['wall_seconds']:.2f} s; engine RSS {e['total_rss_mib']:.0f} MiB (JVM {e.get('jvm_rss_mib') or 0:.0f}), "
            f"PSS {e['total_pss_mib']:.0f} MiB{heap}; {e.get('jvm_threads')} threads, {e['processes']} processes, "
            f"{e.get('temp_files')} temp files, {e.get('sessions_open')} open sessions")


def verify(root: Path) -> dict[str, Any]:
    """``lakehouse verify`` on the lakehouse the increments built: nothing lost or doubled.
    A violation on a table that is not on disk (``gold.device_counts``: the reference pipeline
    does not build it) is set aside, and named."""
    try:
        done = subprocess.run([PYTHON, "-m", "lakehouse_assets.cli", "--root", str(root), "verify", "--json"],
                              env=base_env(), cwd=product_dir(), capture_output=True, text=True, timeout=600)
        report = json.loads(done.stdout)
    except (subprocess.SubprocessError, ValueError) as exc:
        return {"ok": False, "error": str(exc)}
    failed, set_aside = [], []
    for invariant in report.get("invariants", []):
        for violation in invariant.get("violations", []):
            built = (root / Path(*violation.get("table", "?").split("."))).is_dir()
            (failed if built else set_aside).append({"invariant": invariant["name"], **violation})
    skipped = {r["name"]: r["skipped"] for r in report.get("invariants", []) if r.get("skipped")}
    # Nothing checked is no verdict: an invariant skips when it finds no tables.
    return {"ok": not failed and not skipped, "failed": failed, "skipped": skipped, "set_aside_not_built": set_aside}


# -- analysis -----------------------------------------------------------------------------------------


def analyse(doc: dict[str, Any], warmup: int) -> dict[str, Any]:
    """Slopes after the warm-up (per 100 increments), and what leaked."""
    done = [r for r in doc["increments"] if "error" not in r]
    warmup = min(warmup, len(done) // 2)
    steady = [r for r in done if r["increment"] > warmup]
    slopes = {key: _slope(steady, key) for key in SLOPE_SERIES}
    # Each figure as first measured after the warm-up (the heap is measured every few runs).
    first = {key: next((r["engine"][key] for r in steady if r["engine"].get(key) is not None), None)
             for key in SLOPE_SERIES if key != "wall_seconds"}
    end = doc["engine"].get("at_end") or (done[-1]["engine"] if done else {})
    grows = {key: None if slopes[key] is None else slopes[key] > limit for key, limit in GROWTH_LIMITS.items()}
    leaks = {
        "streaming_queries": {"after_each_max": max((r["engine"].get("streaming_query_threads") or 0 for r in done), default=None),
                              "at_end": end.get("streaming_query_threads"),
                              "leaked": bool(end.get("streaming_query_threads"))},
        "sessions": {"open_after_each_max": max((r["engine"].get("sessions_open") or 0 for r in done), default=None),
                     "open_at_end": end.get("sessions_open"), "seen": end.get("sessions_seen"),
                     "leaked": bool(end.get("sessions_open"))},
        "threads": _growth(first, end, "jvm_threads", slopes, grows),
        "processes": _growth(first, end, "processes", slopes, grows),
        "temp_files": _growth(first, end, "temp_files", slopes, grows),
    }
    walls = [r["wall_seconds"] for r in done]
    window = max(1, min(20, len(steady) // 2))
    return {
        "warmup_increments": warmup, "increments_done": len(done),
        "increments_failed": len(doc["increments"]) - len(done),
        "slopes_per_100_increments": slopes, "growth_limits_per_100": GROWTH_LIMITS, "grows": grows, "leaks": leaks,
        "wall_median_seconds": _round(median(walls)),
        "wall_median_first_window": _round(median([r["wall_seconds"] for r in steady[:window]])),
        "wall_median_last_window": _round(median([r["wall_seconds"] for r in steady[-window:]])),
        "window": window,
        "memory_first_after_warmup": {k: first.get(k) for k in ("total_rss_mib", "total_pss_mib", "heap_used_mib")},
        "memory_at_end": {k: end.get(k) for k in ("total_rss_mib", "total_pss_mib", "heap_used_mib")},
    }


def _growth(first: dict[str, Any], end: dict[str, Any], key: str, slopes: dict[str, Any],
            grows: dict[str, bool | None]) -> dict[str, Any]:
    return {"after_warmup": first.get(key), "at_end": end.get(key), "slope_per_100": slopes.get(key),
            "leaked": grows.get(key)}


def _slope(records: Sequence[dict[str, Any]], key: str) -> float | None:
    """Least-squares slope of ``key`` (an engine figure, or the run's wall time) per 100
    increments; None with fewer than 3 points."""
    points = [(r["increment"], r.get(key) if key == "wall_seconds" else r["engine"].get(key)) for r in records]
    points = [(x, y) for x, y in points if isinstance(y, (int, float))]
    if len(points) < 3 or len({x for x, _ in points}) < 2:
        return None
    slope, _ = statistics.linear_regression([float(x) for x, _ in points], [float(y) for _, y in points])
    return round(slope * 100, 2)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


# -- documents ---------------------------------------------------------------------------------------


def write(doc: dict[str, Any], args: argparse.Namespace, json_path: Path, md_path: Path) -> None:
    doc["analysis"] = analyse(doc, args.warmup)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    for path, text in ((json_path, json.dumps(doc, indent=1, default=str)), (md_path, markdown(doc))):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)


def markdown(doc: dict[str, Any]) -> str:
    meta, a = doc["meta"], doc["analysis"]
    lines: list[str] = []
    out = lines.append
    n = int(meta["args"]["increments"])
    out(f"# Engine health: {n} one-file increments on one Spark Connect engine\n")
    out(f"Run {meta.get('started')} on {meta.get('cpus')} CPUs / {meta.get('mem_total_gib')} GiB, commit "
        f"{meta.get('git_commit')}; took {meta.get('duration_seconds', 0) / 60:.1f} min; load average at start "
        f"{'/'.join(f'{v:.1f}' for v in meta.get('loadavg_at_start') or [])}. {meta['args']['records_per_file']} records "
        f"per file. Mode: {meta['mode']}.\n")
    if doc.get("error"):
        out(f"> **Stopped early**: {doc['error']}\n")
    out("## Verdict\n")
    out(f"{a['increments_done']} increments done, {a['increments_failed']} failed; `lakehouse verify` at the end "
        f"(every landed record in bronze once, bronze = silver + quarantine, gold = its recomputation, versions "
        f"whole): {_verify_text(doc.get('verify'))}.\n")
    out("| what | after warm-up | at the end | slope per 100 increments | leaked / grows |")
    out("|---|---|---|---|---|")
    leaks = a["leaks"]
    out(f"| live streaming queries (JVM threads) | – | {_f(leaks['streaming_queries']['at_end'])} | – | "
        f"{_yes(leaks['streaming_queries']['leaked'])} (max {_f(leaks['streaming_queries']['after_each_max'])} right after a run) |")
    out(f"| open sessions (engine log) | – | {_f(leaks['sessions']['open_at_end'])} of {_f(leaks['sessions']['seen'])} | – | "
        f"{_yes(leaks['sessions']['leaked'])} (max {_f(leaks['sessions']['open_after_each_max'])} right after a run) |")
    for key, label in (("threads", "JVM threads"), ("processes", "engine processes (JVM + Python workers)"),
                       ("temp_files", "files in the engine's temp folder")):
        g = leaks[key]
        out(f"| {label} | {_f(g['after_warmup'])} | {_f(g['at_end'])} | {_f(g['slope_per_100'])} | {_yes(g['leaked'])} |")
    slopes, grows = a["slopes_per_100_increments"], a["grows"]
    first, end = a["memory_first_after_warmup"], a["memory_at_end"]
    for key, label in (("total_rss_mib", "engine RSS, MiB (JVM + workers)"), ("total_pss_mib", "engine PSS, MiB"),
                       ("heap_used_mib", "JVM heap after full GC, MiB")):
        out(f"| {label} | {_f(first.get(key))} | {_f(end.get(key))} | {_f(slopes.get(key))} | {_yes(grows.get(key))} |")
    out("")
    out(f"Slopes are least squares over increments {a['warmup_increments'] + 1}..{a['increments_done']} (the first "
        f"{a['warmup_increments']} are warm-up). *Grows* means a slope above "
        + ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in a["growth_limits_per_100"].items())
        + " per 100 increments; sessions and queries leak when any is left once every run has ended.\n")
    out(f"Wall time per increment: median {_f(a['wall_median_seconds'])} s; first {a['window']} after warm-up "
        f"{_f(a['wall_median_first_window'])} s, last {a['window']} {_f(a['wall_median_last_window'])} s "
        f"(slope {_f(slopes.get('wall_seconds'))} s per 100 increments).\n")
    out("All slopes per 100 increments: " + ", ".join(f"{k} {_f(v)}" for k, v in slopes.items()) + ".\n")
    engine = doc.get("engine") or {}
    out("## The engine\n")
    out(f"Started in {_f(engine.get('start_seconds'))} s (`lakehouse engine start`, default settings). Initial load: "
        f"{_f((doc.get('initial') or {}).get('wall_seconds'))} s.\n")
    end = engine.get("at_end") or {}
    if end:
        out("At the end, its Python processes by worker module: "
            + ", ".join(f"`{k}` {v}" for k, v in (end.get("python_worker_modules") or {}).items())
            + "; its JVM's most common thread names (15 characters, as Linux keeps them): "
            + ", ".join(f"`{k}` {v}" for k, v in (end.get("jvm_thread_names") or {}).items()) + ".\n")
    _series_table(out, doc)
    out("## How it was measured\n")
    out("- Memory: RSS and PSS of the engine's JVM and of every Python worker it started (found by the engine's "
        "environment marker, `engine_processes()`), read from /proc after each run; a run's own peak (its process and "
        "the engine's, sampled together every 0.1 s) is in the JSON.")
    out("- Threads: /proc/<JVM>/task; a live streaming query is a thread named `stream execution thread for ...`. "
        "Sessions: the engine's INFO log (`SessionHolder` lines: seen, and closed). Temp files: the engine runs with "
        "`SPARK_LOCAL_DIRS`, `java.io.tmpdir` and `TMPDIR` in a folder of its own. Heap: `jcmd GC.run` then "
        "`GC.heap_info`, between runs.")
    out(f"- Data: the project's simulator, one file of {meta['args']['records_per_file']} records per increment (1 % "
        "bad records), landed before each run.")
    return "\n".join(lines) + "\n"


def _series_table(out: Callable[[str], None], doc: dict[str, Any]) -> None:
    rows = doc["increments"]
    step = 1 if len(rows) <= 30 else 10
    keys = ("total_rss_mib", "jvm_rss_mib", "workers_rss_mib", "total_pss_mib", "heap_used_mib", "jvm_threads",
            "processes", "temp_files", "sessions_open", "log_mib")
    out(f"Every {'' if step == 1 else f'{step}th '}increment (MiB; heap after full GC where measured):\n")
    out("| increment | wall s | " + " | ".join(k.replace("_", " ") for k in keys) + " |")
    out("|---|---|" + "---|" * len(keys))
    initial = doc.get("initial")
    shown = ([("initial", initial)] if initial else []) + [
        (str(r["increment"]), r) for r in rows if r["increment"] % step == 0 or r is rows[-1]]
    for label, r in shown:
        e = r.get("engine") or {}
        wall = "failed" if "error" in r else _f(r.get("wall_seconds"))
        out(f"| {label} | {wall} | " + " | ".join(_f(e.get(k)) for k in keys) + " |")
    out("")


def _verify_text(result: dict[str, Any] | None) -> str:
    if not result:
        return "was not checked"
    aside = sorted({v["table"] for v in result.get("set_aside_not_built", [])})
    note = f" (set aside: {', '.join(aside)}, which the pipeline does not build)" if aside else ""
    if result.get("ok"):
        return "holds" + note
    broken = "; ".join(f"{v['invariant']} on {v['table']}: {v['message'][:200]}" for v in result.get("failed", []))
    skipped = "; ".join(f"{name} skipped ({why})" for name, why in (result.get("skipped") or {}).items())
    return "does **not** hold: " + ("; ".join(x for x in (broken, skipped) if x) or result.get("error") or "?") + note


def _f(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def _yes(value: Any) -> str:
    return "–" if value is None else ("**yes**" if value else "no")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
