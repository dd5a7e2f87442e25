"""How many Spark jobs the whole graph runs, per table: after one landed recordings file, and
with nothing new (issue 67's targets: at most 60 and 2, embedded).

    python -m benchmarks.spark_jobs            # make bench-jobs

A fresh lakehouse gets the first batch ``make run`` lands (5 recordings files, the patients,
3 patient changes) and the whole graph materialized once, checks included (not counted); then
one more recordings file and the whole graph again (counted); then the whole graph with
nothing new (counted). The runs are in this process, embedded, on one SparkSession; Spark's
own event log counts the jobs, and each job is given to the Dagster step that was running
when Spark submitted it (steps run one at a time, in process). Job counts do not depend on
the machine; the seconds beside them do.

Writes ``benchmarks/results/spark_jobs.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.contenders import VENV_BIN, base_env
from benchmarks.measure import head_commit

RESULTS = Path(__file__).resolve().parent / "results"
#: The targets of issue 67 (embedded, the whole graph).
TARGETS = {"one_file": 60, "nothing_new": 2}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_jobs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="spark_jobs", help="results file stem in benchmarks/results")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return _child(args.child)
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as work:
        workdir = Path(work)
        events = workdir / "spark-events"
        events.mkdir()
        env = base_env(LAKEHOUSE_ROOT=str(workdir / "lake"), DAGSTER_HOME=str(workdir / "dagster_home"),
                       LAKEHOUSE_SPARK_CONF=json.dumps({"spark.eventLog.enabled": "true",
                                                        "spark.eventLog.compress": "false",
                                                        "spark.eventLog.dir": events.as_uri()}))
        (workdir / "dagster_home").mkdir()
        subprocess.run([f"{VENV_BIN}/lakehouse", "land", "--files", "5", "--changes", "3"], env=env, check=True)
        subprocess.run([sys.executable, "-m", "benchmarks.spark_jobs", "--child", str(workdir)], env=env, check=True)
        runs = json.loads((workdir / "runs.json").read_text())
        logs = [p for p in events.iterdir() if not p.name.startswith(".")]
        if len(logs) != 1:
            raise RuntimeError(f"expected one Spark event log in {events}, found {[p.name for p in logs]}")
        submitted = job_submissions(logs[0])
    result = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "commit": head_commit(RESULTS.parent.parent), "targets": TARGETS,
              "runs": {run["name"]: attribute(run, submitted) for run in runs}}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.output}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{args.output}.md").write_text(markdown(result))
    print(markdown(result))
    return 0


def _child(workdir: Path) -> int:
    """The graph's three runs, in this process: the first batch, one more file, nothing new."""
    import dagster as dg

    from lakehouse_assets.definitions import defs

    instance = dg.DagsterInstance.get()
    job = defs.resolve_implicit_global_asset_job_def()
    runs = []
    for name in ("first_batch", "one_file", "nothing_new"):
        if name == "one_file":
            subprocess.run([f"{VENV_BIN}/lakehouse", "land", "--files", "1"], env=os.environ, check=True)
        started = time.time()
        result = job.execute_in_process(instance=instance, raise_on_error=True)
        runs.append({"name": name, "seconds": round(time.time() - started, 2),
                     "started": started, "ended": time.time(), "steps": step_windows(instance, result.run_id)})
    (workdir / "runs.json").write_text(json.dumps(runs))
    # Stopping the session closes (and flushes) Spark's event log.
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    return 0


def step_windows(instance: Any, run_id: str) -> list[dict[str, Any]]:
    """Each step of the run with when it started and ended (seconds since the epoch)."""
    windows: dict[str, dict[str, Any]] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or entry.step_key is None:
            continue
        window = windows.setdefault(entry.step_key, {"step": entry.step_key})
        if event.event_type_value == "STEP_START":
            window["start"] = entry.timestamp
        elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE", "STEP_SKIPPED"):
            window["end"] = entry.timestamp
    return [w for w in windows.values() if "start" in w and "end" in w]


def job_submissions(event_log: Path) -> list[tuple[float, str]]:
    """When Spark submitted each job (seconds since the epoch) and its call site (what the job
    did: the Python line or Delta operation), from the event log (a file, or a folder of
    rolled files as Spark 4 writes it)."""
    files = sorted(p for p in event_log.iterdir() if p.name.startswith("events_")) if event_log.is_dir() else [event_log]
    jobs = []
    for file in files:
        with file.open() as lines:
            for line in lines:
                if '"SparkListenerJobStart"' in line:
                    event = json.loads(line)
                    properties = event.get("Properties") or {}
                    site = properties.get("callSite.short") or properties.get("spark.job.description") or "?"
                    jobs.append((event["Submission Time"] / 1000, " ".join(site.split())[:120]))
    return jobs


def attribute(run: dict[str, Any], submitted: list[tuple[float, str]]) -> dict[str, Any]:
    """The run's Spark jobs, in all and per step (a step is a table, or a table and its
    quarantine; jobs outside every step are Dagster's run around them), with each step's
    jobs by call site: the profile a missed target is reported with."""
    per_step: Counter[str] = Counter()
    sites: dict[str, Counter[str]] = {}
    for t, site in submitted:
        if not run["started"] <= t <= run["ended"]:
            continue
        step = next((w["step"] for w in run["steps"] if w["start"] <= t <= w["end"]), "(between steps)")
        per_step[step] += 1
        sites.setdefault(step, Counter())[site] += 1
    return {"seconds": run["seconds"], "jobs": sum(per_step.values()), "per_step": dict(per_step.most_common()),
            "call_sites": {step: dict(c.most_common()) for step, c in sites.items()}}


def markdown(result: dict[str, Any]) -> str:
    lines = ["# Spark jobs of the whole graph (embedded)", "",
             f"Measured {result['measured_at']} by `make bench-jobs` (`benchmarks/spark_jobs.py`).", "",
             "| run | Spark jobs | target | seconds |", "|---|---:|---:|---:|"]
    for name, run in result["runs"].items():
        target = result["targets"].get(name)
        lines.append(f"| {name} | {run['jobs']} | {'' if target is None else f'≤ {target}'} | {run['seconds']} |")
    for name in ("one_file", "nothing_new"):
        run = result["runs"].get(name)
        if run and run["per_step"]:
            lines += ["", f"## {name}: jobs per step", "", "| step | jobs |", "|---|---:|"]
            lines += [f"| {step} | {jobs} |" for step, jobs in run["per_step"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
