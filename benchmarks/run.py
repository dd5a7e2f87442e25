"""Run the benchmark suite and write ``benchmarks/results/latest.json`` and ``latest.md``.

    python -m benchmarks.run                      # the full suite (make bench)
    python -m benchmarks.run --quick              # a small one (make bench-quick)
    python -m benchmarks.run --scenarios initial_load,increment --repeats 2
    python -m benchmarks.run --contenders lakehouse_assets,plain_streaming
    python -m benchmarks.run --quick --contenders lakehouse_assets_connect,plain_streaming,plain_streaming_warm

Every contender runs the same generated data in this same invocation, each run in a fresh
child process; the report gives medians and the ratios between contenders.
``lakehouse_assets_connect`` runs attach to a warm Spark Connect engine and
``plain_streaming_warm`` runs the hand-written queries in one long-lived session: both are
started (and warmed up) once, before their first timed run, and stopped at the end, also on
Ctrl-C or failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import report
from benchmarks.contenders import PRODUCT_ENV, REPO, all_contenders
from benchmarks.contenders.lakehouse_assets import QUARANTINE_ENV
from benchmarks.measure import head_commit
from benchmarks.scenarios import (
    ALL_SCENARIOS,
    LOAD_SCENARIOS,
    Bench,
    Plan,
    machine_facts,
    probe_product,
    run_history,
    run_load,
)

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_WORKDIR = Path(__file__).resolve().parent / ".work"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small data, one run each, no history or latency scenario")
    parser.add_argument("--scenarios", default=None,
                        help=f"comma-separated, from: {', '.join(ALL_SCENARIOS)} (default: all; --quick: all but history and latency)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per contender in the short scenarios")
    parser.add_argument("--contenders", default=None, help=f"comma-separated subset of: {', '.join(all_contenders())}")
    parser.add_argument("--bad-rate", type=float, default=None, help="share of bad records in the landed files (default 0.01)")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="where data and outputs go (emptied first)")
    parser.add_argument("--output", default=None, help="results file stem (default: latest, or quick with --quick)")
    parser.add_argument("--product", default="worktree",
                        help="which product code to measure: the working tree (default) or a git ref (e.g. HEAD), "
                        "unpacked into the work folder so edits in progress do not get measured")
    parser.add_argument("--keep", action="store_true", help="keep the work folder afterwards")
    parser.add_argument("--budget-minutes", type=float, default=None,
                        help="finish within this (default 30, quick 5): the latency samples stop early, never "
                        "below 3, rather than run past it (stopping dagster dev included)")
    return parser.parse_args(argv)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupted)  # so the running child is stopped too
    args = parse_args(argv)
    plan = Plan.quick_plan(args.repeats) if args.quick else Plan.full(args.repeats)
    if args.bad_rate is not None:
        plan = dataclasses.replace(plan, bad_rate=args.bad_rate)
    if args.scenarios:
        scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
        unknown = set(scenarios) - set(ALL_SCENARIOS)
        if unknown:
            print(f"unknown scenario(s): {', '.join(sorted(unknown))}; choose from {', '.join(ALL_SCENARIOS)}", file=sys.stderr)
            return 2
    else:
        scenarios = list(plan.default_scenarios)
    only = None
    if args.contenders:
        only = [c.strip() for c in args.contenders.split(",") if c.strip()]
        unknown = set(only) - set(all_contenders())
        if unknown:
            print(f"unknown contender(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
    stem = args.output or ("quick" if args.quick else "latest")

    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    started = time.monotonic()
    meta = machine_facts()
    meta["product"] = use_product(args.product, args.workdir / "product")
    meta["plan"] = plan.as_dict()
    meta["scenarios"] = scenarios

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {message}", flush=True)

    budget = args.budget_minutes or (5 if args.quick else 30)
    bench = Bench(plan=plan, workdir=args.workdir, only=only, log=log, deadline=started + budget * 60)
    log(f"plan: {', '.join(scenarios)}; about {plan.estimate_seconds() / 60:.0f} min on an idle 2-core machine; "
        f"budget {budget:g} min")
    bench.facts = probe_product(log)
    os.environ[QUARANTINE_ENV] = ",".join(bench.facts.get("quarantine_assets") or [])
    log(f"product: {len(bench.facts.get('assets', []))} assets, {bench.facts['checks_defined']} checks, "
        f"quarantine assets: {bench.facts.get('quarantine_assets') or 'none'}")

    def save() -> None:
        meta["duration_seconds"] = round(time.monotonic() - started, 1)
        meta["loadavg_at_end"] = __import__("os").getloadavg()
        doc = {"meta": meta, "product": bench.facts, "results": bench.results}
        report.write(doc, RESULTS / f"{stem}.json", RESULTS / f"{stem}.md")

    try:
        load = [s for s in scenarios if s in LOAD_SCENARIOS]
        if load:
            run_load(bench, load)
            save()
        if "history" in scenarios:
            run_history(bench)
            save()
        if "latency" in scenarios:
            from benchmarks.latency import run_latency

            run_latency(bench)
    finally:
        try:
            bench.close()  # the warm engine and the resident anchor, before their folders go
        finally:
            save()
            if not args.keep:
                shutil.rmtree(args.workdir, ignore_errors=True)
    log(f"done in {(time.monotonic() - started) / 60:.1f} min: {RESULTS / stem}.json and .md")
    failed = [t["target"] for t in bench_targets(RESULTS / f"{stem}.json") if t["met"] is False]
    if failed:
        log("targets missed: " + "; ".join(failed))
    return 0


def use_product(ref: str, folder: Path) -> dict[str, str]:
    """Measure the working tree, or a snapshot of ``ref`` unpacked into ``folder`` (for the
    children, through :data:`PRODUCT_ENV`, and for this process's own imports)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout

    if ref == "worktree":
        changed = git("status", "--porcelain", "--", "lakehouse_assets", "instance", "workspace.yaml").splitlines()
        return {"source": "working tree", "commit": head_commit(REPO),
                "uncommitted_product_files": str(len(changed))}
    commit = git("rev-parse", "--short", ref).strip()
    folder.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", "--format=tar", ref], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    # The benchmarks themselves always come from this checkout, never from the snapshot.
    shutil.rmtree(folder / "benchmarks", ignore_errors=True)
    # Delta Lake's jars are resolved by `make install`, not kept in git: the snapshot uses this
    # checkout's, checked against the snapshot's own jars/SHA256SUMS when its sessions start.
    if (folder / "jars").is_dir():
        (folder / "jars" / "lib").symlink_to(REPO / "jars" / "lib", target_is_directory=True)
    # So is the tests' S3-API server's (benchmarks.object_storage starts it).
    if (folder / "jars" / "s3-server").is_dir():
        (folder / "jars" / "s3-server" / "lib").symlink_to(REPO / "jars" / "s3-server" / "lib", target_is_directory=True)
    os.environ[PRODUCT_ENV] = str(folder)
    sys.path.insert(0, str(folder))
    return {"source": f"snapshot of {ref}", "commit": commit, "uncommitted_product_files": "0"}


def bench_targets(path: Path) -> list[dict]:
    import json

    return json.loads(path.read_text()).get("targets", [])


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
