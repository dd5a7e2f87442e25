"""Does a whole increment cost the same after 10,000 micro-batches as after 10? The question of
issue 19 asked of the whole graph, where :mod:`benchmarks.many_batches` asks it of single
storage operations.

    python -m benchmarks.increment_after_batches                          # 10 and 10,000
    python -m benchmarks.increment_after_batches --batches 10 1000 --repeats 1   # a quick look

For each N, a lakehouse of its own (as bench-quick builds one: the reference files landed with
the simulator, the reference pipeline materialized in process by ``dagster.materialize``,
each run a fresh child process, see :mod:`benchmarks.contenders.lakehouse_assets`):

1. set-up, not timed: the initial files and a run of the whole graph; then every Delta table
   (bronze, the patients lookup, silver, its quarantine, gold, the AUTO CDC tables and their state) gets
   N-1 empty micro-batches written as commit files, with the log checkpoint delta-rs would
   have written (:mod:`benchmarks.padding`; the event log, ``system.event_log``, is a view
   over these tables' commits, so it grows with them); a catch-up run, so the stream sources
   read past the padded versions; and a one-file increment, so that each table's newest
   commits are its own query's again, as on a table whose every batch was real (what a run
   wrote and what it read are read back from a table's history newest first).
   ``lakehouse verify``'s invariants are checked after each step;
2. timed, ``--repeats`` times, the N values interleaved: one new file landed and the whole
   graph materialized (``increment``), then a run with nothing new (``nothing_new``);
3. the mitigations, one after the other: every table's log files aged past the log retention
   (30 days), then ``lakehouse vacuum --all``, which removes the commit files older than the
   last log checkpoint; step 2 again; then ``lakehouse optimize --all``, which compacts each
   table's data files; step 2 again.

Times are the child process's wall time (JVM start included) and the Dagster run's; per asset,
the run's step times; the storage calls the child times, reading the run's commits back
among them (its profile).
Writes ``benchmarks/results/many_batches_increment.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.contenders import VENV_BIN, all_contenders, base_env, stage_files
from benchmarks.many_batches import LOG_RETENTION, age_log
from benchmarks.padding import as_rows, data_file_counts, log_file_counts, pad_lakehouse, table_folders
from benchmarks.scenarios import Bench, Plan, land_files, machine_facts
from lakehouse_assets.location import locate
from lakehouse_assets.reliability import check_all
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings

RESULTS = Path(__file__).resolve().parent / "results"
WORKDIR = Path(__file__).resolve().parent / ".work" / "increment_after_batches"
OUTPUT = "many_batches_increment"
#: Tables ``lakehouse verify`` checks that the reference pipeline (the benchmark's selection)
#: does not build: their violations say so, not that the padding broke anything.
NOT_BUILT = ("gold.device_counts",)
#: The states the timed runs are made in, each on top of the one before, and how the report names them.
PHASES = {"padded": "padded", "after_vacuum": "then aged log + vacuum --all",
          "after_optimize": "then optimize --all"}
KINDS = ("increment", "nothing_new")


class Lakehouses:
    """One lakehouse per N, fed the same landed files in the same order."""

    def __init__(self, bench: Bench, landing: Path, names: list[str], batches: list[int]) -> None:
        self.bench, self.landing, self.names = bench, landing, names
        self.contender = all_contenders()["lakehouse_assets"]
        self.workspaces = {n: bench.workspace("increment_after_batches", self.contender, f"_{n}") for n in batches}
        self.staged = dict.fromkeys(batches, 0)

    def root(self, n: int) -> Path:
        return self.workspaces[n].root

    def land(self, n: int, files: int) -> None:
        """The next ``files`` landed files appear in N's landing folder."""
        self.staged[n] += files
        stage_files(self.landing, self.workspaces[n], self.names[: self.staged[n]])

    def run(self, n: int, label: str) -> dict[str, Any]:
        """Materialize the reference pipeline once on N's lakehouse; what the run reported."""
        return run_facts(self.bench.run(self.contender, self.workspaces[n], f"{label}_n{n}"))


def run_facts(record: dict[str, Any]) -> dict[str, Any]:
    """The parts of a run's record this benchmark reports: times, per asset and per call."""
    if "error" in record:
        return {"label": record["label"], "error": record["error"]}
    split = record.get("split") or {}
    detail = split.get("detail") or {}
    steps = (detail.get("timeline") or {}).get("steps") or {}
    return {
        "label": record["label"],
        "wall_seconds": record["wall_seconds"],
        "materialize_seconds": split.get("dagster_materialize"),
        "spark_session_start_seconds": split.get("spark_session_start"),
        "steps": {k: round(v["end"] - v["start"], 3) for k, v in steps.items() if "start" in v and "end" in v},
        "io_seconds": detail.get("io_seconds") or {},
        "profile": {k: v["seconds"] for k, v in (detail.get("profile") or {}).items()},
        "queries": [{"query": q.get("query"), "seconds": q.get("seconds"), "duration_ms": q.get("duration_ms")}
                    for q in detail.get("queries") or []],
    }


def verify(root: Path) -> dict[str, Any]:
    """``lakehouse verify``'s invariants on the lakehouse at ``root``; ``ok`` leaves out the
    tables the reference pipeline does not build (:data:`NOT_BUILT`)."""
    started = time.perf_counter()
    report = check_all(LakehouseResource.from_settings(LakehouseSettings(locate(root))))
    violations = [{"invariant": v.invariant, "table": v.table, "message": v.message} for v in report.violations]
    return {"ok": not [v for v in violations if v["table"] not in NOT_BUILT], "violations": violations,
            "seconds": round(time.perf_counter() - started, 2)}


def lakehouse_command(root: Path, *args: str) -> dict[str, Any]:
    """``lakehouse ARGS --json`` on the lakehouse at ``root``, as an operator runs it."""
    started = time.perf_counter()
    out = subprocess.run([f"{VENV_BIN}/lakehouse", *args, "--json"], env=base_env(LAKEHOUSE_ROOT=str(root)),
                         capture_output=True, text=True, timeout=1_800)
    try:
        reply = json.loads(out.stdout)
    except ValueError:
        reply = {"error": (out.stdout + out.stderr)[-2_000:]}
    return {"command": " ".join(["lakehouse", *args]), "returncode": out.returncode,
            "seconds": round(time.perf_counter() - started, 2), "reply": reply}


def set_up(lakes: Lakehouses, n: int, initial_files: int, log: Any) -> dict[str, Any]:
    """Initial load, padding to N batches, catch-up and one increment; not timed."""
    root = lakes.root(n)
    facts: dict[str, Any] = {"batches": n}
    lakes.land(n, initial_files)
    facts["initial_run"] = lakes.run(n, "setup_initial")
    facts["verify_before_padding"] = verify(root)
    facts["padding"] = as_rows(pad_lakehouse(root, n - 1))
    log(f"  padded N={n}: {sum(p['seconds'] for p in facts['padding']):.1f} s")
    facts["catch_up_run"] = lakes.run(n, "setup_catch_up")  # no file landed: read past the padded versions
    lakes.land(n, 1)
    facts["warm_up_increment"] = lakes.run(n, "setup_increment")
    facts["verify_after_set_up"] = verify(root)
    facts["log_files"], facts["data_files"] = log_file_counts(root), data_file_counts(root)
    return facts


def timed_runs(lakes: Lakehouses, batches: list[int], repeats: int, phase: str) -> dict[int, dict[str, list[Any]]]:
    """``repeats`` rounds of (one-file increment, nothing new) on each N, the order of the N
    values turning between rounds so that each sees the machine's noise alike."""
    runs: dict[int, dict[str, list[Any]]] = {n: {k: [] for k in KINDS} for n in batches}
    for repeat in range(repeats):
        shift = repeat % len(batches)
        for n in batches[shift:] + batches[:shift]:
            lakes.land(n, 1)
            runs[n]["increment"].append(lakes.run(n, f"{phase}_increment_{repeat + 1}"))
            runs[n]["nothing_new"].append(lakes.run(n, f"{phase}_nothing_new_{repeat + 1}"))
    return runs


def mitigate(phase: str, root: Path) -> dict[str, Any]:
    """Put the lakehouse at ``root`` in the state of ``phase``: its log aged past the log
    retention and vacuumed, or then compacted."""
    if phase == "after_vacuum":
        # Only the files' times are aged, not the commits' own timestamps, which VACUUM's check
        # of the stream readers reads: safe here because the set-up's runs left every reader
        # resuming from a version above the last log checkpoint, which the cleanup keeps.
        for path in table_folders(root).values():
            age_log(path, LOG_RETENTION + dt.timedelta(days=1))
        done = lakehouse_command(root, "vacuum", "--all")
    else:
        done = lakehouse_command(root, "optimize", "--all")
    return {**done, "log_files": log_file_counts(root), "data_files": data_file_counts(root), "verify": verify(root)}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians (and the spread) over a kind's runs: wall, run, per step, per timed call."""
    ok = [r for r in runs if "error" not in r]

    def med(values: list[float]) -> float | None:
        return round(statistics.median(values), 3) if values else None

    def per_key(field: str) -> dict[str, float | None]:
        keys = sorted({k for r in ok for k in r[field]})
        return {k: med([r[field][k] for r in ok if k in r[field]]) for k in keys}

    walls = [r["wall_seconds"] for r in ok]
    return {
        "wall_seconds": med(walls), "min_wall_seconds": min(walls, default=None),
        "max_wall_seconds": max(walls, default=None),
        "materialize_seconds": med([r["materialize_seconds"] for r in ok if r["materialize_seconds"] is not None]),
        "steps": per_key("steps"), "io_seconds": per_key("io_seconds"), "profile": per_key("profile"),
        "runs": len(runs), "failures": len(runs) - len(ok),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, nargs="+", default=[10, 10_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--initial-files", type=int, default=4)
    parser.add_argument("--records-per-file", type=int, default=5_000)
    parser.add_argument("--no-mitigation", action="store_true", help="time the padded tables only")
    args = parser.parse_args()
    batches = sorted(set(args.batches))
    if batches[0] < 1:
        parser.error("--batches must be at least 1")
    started = time.monotonic()
    shutil.rmtree(WORKDIR, ignore_errors=True)
    plan = Plan(initial_files=args.initial_files, records_per_file=args.records_per_file)
    bench = Bench(plan, WORKDIR, log=lambda line: print(line, flush=True))
    landing = WORKDIR / "landing"
    phases = list(PHASES)[:1] if args.no_mitigation else list(PHASES)
    files = args.initial_files + 1 + args.repeats * len(phases)
    names = land_files(landing, plan, [(files, args.records_per_file)])
    lakes = Lakehouses(bench, landing, names, batches)
    report: dict[str, Any] = {
        "machine": machine_facts(), "batches": batches, "repeats": args.repeats,
        "initial_files": args.initial_files, "records_per_file": args.records_per_file,
        "set_up": {}, "phases": {}, "mitigation": {},
    }
    for n in batches:
        print(f"set-up N={n}", flush=True)
        report["set_up"][str(n)] = set_up(lakes, n, args.initial_files, print)
    for phase in phases:
        if phase != "padded":
            for n in batches:
                done = report["mitigation"].setdefault(phase, {})[str(n)] = mitigate(phase, lakes.root(n))
                print(f"  {done['command']} N={n}: {done['seconds']} s, log files {json.dumps(done['log_files'])}",
                      flush=True)
        runs = timed_runs(lakes, batches, args.repeats, phase)
        report["phases"][phase] = {
            str(n): {kind: {**summarize(r), "all": r} for kind, r in by_kind.items()} for n, by_kind in runs.items()}
        for n in batches:
            report["phases"][phase][str(n)]["log_files"] = log_file_counts(lakes.root(n))
            report["phases"][phase][str(n)]["verify"] = verify(lakes.root(n))
    report["minutes"] = round((time.monotonic() - started) / 60, 1)
    report["run_at"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{OUTPUT}.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / f"{OUTPUT}.md").write_text(render(report))
    print((RESULTS / f"{OUTPUT}.md").read_text())
    shutil.rmtree(WORKDIR, ignore_errors=True)


def render(report: dict[str, Any]) -> str:
    """The report as Markdown (the "What it shows" section is written by hand, after a run)."""
    batches = [str(n) for n in report["batches"]]
    base = batches[0]
    phases = [p for p in PHASES if p in report["phases"]]

    def s(value: float | None) -> str:
        return "" if value is None else f"{value:.1f}"

    def ratio(mine: float | None, theirs: float | None) -> str:
        return f"{mine / theirs:.2f}x" if mine and theirs else ""

    def verdict(result: dict[str, Any] | None) -> str:
        if not result:
            return ""
        found = sorted({f"{v['invariant']} on {v['table']}" for v in result["violations"]})
        return ("ok" if result["ok"] else "FAILED") + (f" ({'; '.join(found)})" if found else "")

    lines = [
        "# A whole increment after N micro-batches", "",
        f"Run {report['run_at']} ({report['minutes']} minutes) on {os.cpu_count()} CPUs, load average at start "
        f"{', '.join(f'{x:.1f}' for x in report['machine'].get('loadavg_at_start', ()))}; medians of "
        f"{report['repeats']} runs, the N values interleaved. Each lakehouse: {report['initial_files']} reference "
        f"files of {report['records_per_file']:,} records, then its tables padded to N micro-batches; each timed "
        "increment lands one more file and materializes the reference pipeline (bronze -> silver + quarantine -> "
        "gold) in a fresh process. See `benchmarks/increment_after_batches.py`.", "",
        "## One-file increment and nothing new: whole process (JVM start included), and its Dagster run", "",
        "| tables | N | increment s [min-max] | its run s | nothing new s [min-max] | its run s "
        "| ratio to the smallest N: increment, nothing new (whole process; Dagster run) |",
        "|---|---|---|---|---|---|---|",
    ]
    for phase in phases:
        data = report["phases"][phase]
        for n in batches:
            inc, idle = data[n]["increment"], data[n]["nothing_new"]
            lines.append(
                f"| {PHASES[phase]} | {int(n):,} | {s(inc['wall_seconds'])} "
                f"[{s(inc['min_wall_seconds'])}-{s(inc['max_wall_seconds'])}] | {s(inc['materialize_seconds'])} | "
                f"{s(idle['wall_seconds'])} [{s(idle['min_wall_seconds'])}-{s(idle['max_wall_seconds'])}] | "
                f"{s(idle['materialize_seconds'])} | "
                f"{ratio(inc['wall_seconds'], data[base]['increment']['wall_seconds'])}, "
                f"{ratio(idle['wall_seconds'], data[base]['nothing_new']['wall_seconds'])} "
                f"({ratio(inc['materialize_seconds'], data[base]['increment']['materialize_seconds'])}, "
                f"{ratio(idle['materialize_seconds'], data[base]['nothing_new']['materialize_seconds'])}) |")
    def facts_at(stage: str, n: str) -> dict[str, Any]:
        return report["set_up"][n] if stage == "padded" else report["mitigation"][stage][n]  # type: ignore[no-any-return]

    for field, title in (("log_files", "`_delta_log` files"), ("data_files", "Data files of the latest version")):
        tables = sorted({t for n in batches for t in report["set_up"][n][field]})
        lines += ["", f"## {title} per table", "",
                  "| table | " + " | ".join(f"N={int(n):,} {PHASES[p]}" for n in batches for p in phases) + " |",
                  "|---|" + "---|" * (len(phases) * len(batches))]
        for table in tables:
            cells = [facts_at(p, n)[field].get(table) for n in batches for p in phases]
            lines.append(f"| {table} | " + " | ".join("" if c is None else f"{c:,}" for c in cells) + " |")
    for phase in phases:
        lines += ["", f"## Per asset and per call ({PHASES[phase]}; medians, s)", "",
                  "| what | " + " | ".join(f"{kind.replace('_', ' ')} N={int(n):,}" for kind in KINDS for n in batches)
                  + " |", "|---|" + "---|" * (len(KINDS) * len(batches))]
        data = report["phases"][phase]
        for field, prefix in (("steps", "step "), ("profile", "")):
            for key in sorted({k for n in batches for kind in KINDS for k in data[n][kind][field]}):
                values = [data[n][kind][field].get(key) for kind in KINDS for n in batches]
                lines.append(f"| {prefix}{key} | " + " | ".join("" if v is None else f"{v:.3f}" for v in values) + " |")
    lines += ["", "## Set-up (not timed) and `lakehouse verify`", "",
              "| N | padding s | catch-up run s | after set-up | " + " | ".join(
                  f"after the runs {PHASES[p]}" if p == "padded" else f"{PHASES[p]} / after its runs" for p in phases)
              + " |", "|---|---|---|---|" + "---|" * len(phases)]
    for n in batches:
        setup = report["set_up"][n]
        cells = [verdict(report["phases"]["padded"][n]["verify"])] + [
            f"{verdict(report['mitigation'][p][n]['verify'])} / {verdict(report['phases'][p][n]['verify'])}"
            for p in phases if p != "padded"]
        lines.append(f"| {int(n):,} | {sum(p['seconds'] for p in setup['padding']):.1f} | "
                     f"{s(setup['catch_up_run'].get('wall_seconds'))} | {verdict(setup['verify_after_set_up'])} | "
                     + " | ".join(cells) + " |")
    lines += ["", f"`{NOT_BUILT[0]}` is checked by `lakehouse verify` but not built by the reference pipeline, "
              "so its violation is expected and not counted against `ok`."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
