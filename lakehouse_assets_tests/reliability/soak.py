"""``make soak``: a long crash campaign, its figures written where the README can cite them.

    python -m lakehouse_assets_tests.reliability.soak --kills 60 [--seed N]

Writes ``reliability/results/latest.md`` and ``latest.json`` (kills per point and per step,
reruns, invariant results, durations) and exits 1 if a run failed or an invariant broke.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from lakehouse_assets_tests.ports import free_port
from lakehouse_assets_tests.reliability.crash_harness import CrashHarness, crash_seed, format_summary

RESULTS = Path(__file__).resolve().parents[2] / "reliability" / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=60, help="runs to kill (default 60, as make soak)")
    parser.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: LAKEHOUSE_CRASH_SEED, else random)")
    parser.add_argument("--clean-every", type=int, default=10, help="a clean run and full check after every N kills")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"where latest.md/json go (default {RESULTS})")
    parser.add_argument("--keep", action="store_true", help="keep the lakehouse and the run logs")
    parser.add_argument("--engine", action="store_true",
                        help="run on a Spark Connect engine of the soak's own, and kill the engine too")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else crash_seed()
    work = Path(tempfile.mkdtemp(prefix="lakehouse-soak-"))
    print(f"soak: seed {seed}, {args.kills} kills, working in {work}", flush=True)
    started = dt.datetime.now(dt.UTC)
    harness = CrashHarness(work, seed, clean_every=args.clean_every, engine_port=free_port() if args.engine else None,
                           log=lambda line: print(f"{time.strftime('%H:%M:%S')} {line}", flush=True))
    if args.engine:
        print(f"soak: engine started in {harness.start_engine():.1f}s", flush=True)
    try:
        summary = harness.campaign(args.kills)
    finally:
        harness.stop_engine()
    engine = " SOAK_ENGINE=1" if args.engine else ""
    text = (f"# Crash soak{' on a Spark Connect engine' if args.engine else ''}\n\n"
            f"`make soak SOAK_KILLS={args.kills} SOAK_SEED={seed}{engine}` on {started:%Y-%m-%d %H:%M} UTC, "
            f"{platform.machine()} with {_cpus()} CPUs, Python {platform.python_version()}.\n\n"
            f"{'All invariants held.' if summary.ok else '**FAILED**: see Failures.'}\n\n"
            + format_summary(summary))
    args.results.mkdir(parents=True, exist_ok=True)
    stem = "engine" if args.engine else "latest"
    (args.results / f"{stem}.md").write_text(text)
    (args.results / f"{stem}.json").write_text(json.dumps(summary.as_dict(), indent=2, default=str) + "\n")
    print(text)
    print(f"soak: results in {args.results}/{stem}.md", flush=True)
    if args.keep or not summary.ok:
        print(f"soak: lakehouse and logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if summary.ok else 1



def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


if __name__ == "__main__":
    sys.exit(main())
