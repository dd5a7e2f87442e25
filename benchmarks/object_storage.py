"""A one-file increment with the lakehouse root on an S3-API store, against the same on a local
disk: issue 48's cost target (at most 1.3× the local disk's, in the same run).

    python -m benchmarks.object_storage                 # make bench-store
    python -m benchmarks.object_storage --repeats 3     # a quicker look

The same product, the same landed files, the same machine and the same invocation on two
lakehouses: one whose root is a local folder, one whose root is ``s3a://lake/lakehouse`` on
s3proxy (the tests' S3-API server, :mod:`lakehouse_assets_tests.s3_server`), started here on
loopback and stopped at the end. The reference files are landed once with the project's
simulator; the disk's lakehouse gets them as hard links (:func:`~benchmarks.contenders.stage_files`),
the store's as objects put through the S3 API with the very same bytes.

Each run is the product contender's in-process run (:mod:`benchmarks.contenders.lakehouse_assets`,
the selection of the suite's ``increment`` scenario: bronze -> silver with the patients lookup
and its quarantine -> gold daily average, no checks), a fresh child process with its own JVM.
Each lakehouse first loads ``--initial-files`` files (not timed); then ``--repeats`` times one
more file lands on both and each runs once, the order turning between disk first and store
first. Reported: the median and spread of the whole process per medium, their ratio, each
run's phases (the suite's ``run_overhead`` split), per step and per timed call, and each
query's Structured Streaming progress; the load average at every run's start.

Then (``--count-requests``, on by default) one more file lands and the store's lakehouse runs
once more, through a second s3proxy on the same folder that logs each request it serves: the
S3 requests of one increment, by kind and by what they touch (not in the medians; the logging
slows that server). Writes ``benchmarks/results/object_storage.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from benchmarks.contenders import PATIENTS, RECORDINGS, Contender, Workspace, all_contenders, product_dir, stage_files
from benchmarks.measure import ChildFailed, run_child
from benchmarks.scenarios import Plan, land_files, machine_facts, split, summarize

RESULTS = Path(__file__).resolve().parent / "results"
WORKDIR = Path(__file__).resolve().parent / ".work" / "object_storage"
OUTPUT = "object_storage"
#: Issue 48: a one-file increment on the local S3 server at most this many times the local disk's.
TARGET_RATIO = 1.3
BUCKET = "lake"
SERVER = "s3proxy 4.1.0"
DISK, STORE = "disk", "store"
LABELS = {DISK: "local disk", STORE: f"S3-API store ({SERVER}, loopback)"}
#: The AWS variables a user of the store sets; a run on the disk gets none of them.
AWS_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN", "AWS_PROFILE")
#: The phases of a run, in the order they happen (see :func:`benchmarks.scenarios.split`).
PHASES = ("python_start_and_imports", "spark_session_start", "before_materialize", "dagster_run_start",
          "query_work_io_manager", "dagster_in_steps", "dagster_run_end", "dagster_overhead", "dagster_materialize",
          "teardown_and_exit")


@dataclass
class Lakehouse:
    """One medium's lakehouse: its root as the product is given it, the folder of its Dagster
    home and logs, and how a landed file appears in its landing folder."""

    medium: str
    ws: Workspace
    root: str
    environment: dict[str, str]
    stage: Callable[[Sequence[str]], None]
    runs: list[dict[str, Any]] = field(default_factory=list)
    #: The label of a run that failed on it: its later runs are skipped, as the suite's are.
    broken: str | None = None


def disk_lakehouse(ws: Workspace, landing: Path) -> Lakehouse:
    return Lakehouse(DISK, ws, str(ws.root), {}, lambda names: stage_files(landing, ws, names))


def store_lakehouse(ws: Workspace, landing: Path, environment: dict[str, str]) -> Lakehouse:
    """A lakehouse at ``s3a://lake/lakehouse``; files are put whole, once each (one PUT), as a
    lander on a store puts them."""
    from lakehouse_assets.location import ObjectStore, locate

    root, store = f"s3a://{BUCKET}/lakehouse", ObjectStore.from_env(environment)
    put: set[str] = set()

    def stage(names: Sequence[str]) -> None:
        for relative in [f"{PATIENTS}/patients.csv", *(f"{RECORDINGS}/{name}" for name in names)]:
            if relative not in put:
                locate(f"{root}/landing/{relative}", store).write_bytes((landing / relative).read_bytes())
                put.add(relative)

    return Lakehouse(STORE, ws, root, environment, stage)


def run_once(contender: Contender, lake: Lakehouse, label: str, state_home: Path,
             log: Callable[[str], None]) -> dict[str, Any]:
    """One run of the product contender on ``lake``, a fresh child process; its record (the
    suite's: wall, memory, phases and their split), or its error."""
    if lake.broken:
        return {"medium": lake.medium, "label": label, "error": f"skipped: {lake.broken} failed earlier"}
    argv, env, cwd = contender.command(lake.ws)
    env = {k: v for k, v in env.items() if k not in AWS_VARIABLES}
    env.update(lake.environment)
    env["LAKEHOUSE_ROOT"] = lake.root
    # A root on a store keeps this machine's files (logs, locks) under $XDG_STATE_HOME/lakehouse.
    env["XDG_STATE_HOME"] = str(state_home)
    load = os.getloadavg()
    log_path = lake.ws.logs / f"{label}.log"
    try:
        result = run_child(argv, env=env, cwd=cwd or product_dir(), log_path=log_path, timeout_seconds=1_200)
    except ChildFailed as exc:
        log(f"  {lake.medium:<6} {label:<14} FAILED: {exc}")
        lake.broken = label
        return {"medium": lake.medium, "label": label, "error": str(exc)[-2_000:], "log": str(log_path)}
    log(f"  {lake.medium:<6} {label:<14} {result.wall_seconds:7.2f} s  (load {load[0]:.2f})")
    record = {"medium": lake.medium, "label": label, "loadavg_at_start": [round(x, 2) for x in load],
              **result.as_dict()}
    record["split"] = split(contender, result, lake.ws)
    return record


#: s3proxy's log of a request it serves (``LOG_LEVEL=debug``): its thread, then the method and URL.
REQUEST_LINE = re.compile(r" (\S+) o\.gaul\.s3proxy\.S3ProxyHandler:\d+ .*request: .*\{(GET|PUT|HEAD|DELETE|POST)@\w+ "
                          r"(https?://\S+) HTTP/")
#: The filesystem backend reading an object: another object than a PUT's own, read on the PUT's
#: thread, makes the PUT a copy (a conditional PUT reads its own object first).
READ_LINE = re.compile(r" (\S+) o\.g\.s\.n\.AbstractNio2BlobStore:\d+ .*Getting blob at: (\S+)")
#: What a request touches, by the first folder of its key below the root (or a Delta log anywhere).
AREAS = {"landing": "landing files", "_checkpoints": "streaming checkpoints", "_schemas": "stored schemas",
         "_locks": "table locks"}


def count_requests(log_path: Path, root: str) -> dict[str, dict[str, int]]:
    """The requests in s3proxy's debug log, by kind (LIST, GET, HEAD, PUT, COPY, DELETE, POST)
    and by area (:data:`AREAS`, ``Delta logs``, ``tables' data files``), with totals."""
    prefix = urlparse(root).path.strip("/") + "/"
    counts: dict[str, dict[str, int]] = {}
    last: dict[str, tuple[str, str]] = {}  # thread -> (area, bucket/key) of its last PUT, to tell copies
    for line in log_path.read_text(errors="replace").splitlines():
        read = READ_LINE.search(line)
        if read and read.group(1) in last:
            area, target = last.pop(read.group(1))
            if read.group(2).endswith("/" + target):
                continue
            counts[area]["PUT"] -= 1
            counts[area]["COPY"] = counts[area].get("COPY", 0) + 1
            continue
        match = REQUEST_LINE.search(line)
        if not match:
            continue
        thread, method, url = match.groups()
        last.pop(thread, None)
        parsed = urlparse(url)
        query = parse_qs(parsed.query, keep_blank_values=True)
        target = unquote(parsed.path.lstrip("/"))
        key = target.partition("/")[2]
        kind = method
        if method == "GET" and (not key or "list-type" in query or "prefix" in query):
            kind, key = "LIST", query.get("prefix", [""])[0]
        elif method == "POST" and "delete" in query:
            kind = "DELETE"
        key = key.removeprefix(prefix)
        area = ("Delta logs" if "_delta_log" in key.split("/") else
                AREAS.get(key.split("/")[0], "tables' data files"))
        counts.setdefault(area, {})
        counts[area][kind] = counts[area].get(kind, 0) + 1
        if kind == "PUT":
            last[thread] = (area, target)
    totals: dict[str, int] = {}
    for by_kind in counts.values():
        for kind, n in by_kind.items():
            totals[kind] = totals.get(kind, 0) + n
    counts["all"] = totals
    return {area: {**by_kind, "all": sum(by_kind.values())} for area, by_kind in sorted(counts.items())}


def counted_increment(contender: Contender, lake: Lakehouse, names: Sequence[str], log: Callable[[str], None]) -> dict[str, Any]:
    """One more increment on the store's lakehouse, through a second s3proxy on the same folder
    that logs every request; what it asked of the store."""
    from lakehouse_assets_tests.s3_server import s3_server

    lake.stage(names)  # through the first server, before the logging one starts
    os.environ["LOG_LEVEL"] = "debug"  # s3proxy's logback level, for the server's JVM only
    try:
        with s3_server(WORKDIR / "s3" / "data") as logged:
            os.environ.pop("LOG_LEVEL", None)
            counted = Lakehouse(STORE, lake.ws, lake.root, logged.environment(), lake.stage)
            record = run_once(contender, counted, "counted", WORKDIR / "state", log)
    finally:
        os.environ.pop("LOG_LEVEL", None)
    port = urlparse(logged.endpoint_url).port
    requests = count_requests(WORKDIR / "s3" / f"s3proxy-{port}.log", lake.root)
    log(f"  store  counted        {requests['all']['all']} requests: "
        + ", ".join(f"{k} {v}" for k, v in requests["all"].items() if k != "all"))
    return {"wall_seconds": record.get("wall_seconds"), "error": record.get("error"), "requests": requests}


def details(record: dict[str, Any]) -> dict[str, dict[str, float]]:
    """A run's time per step, per timed call and per query's progress phase, in seconds."""
    detail = (record.get("split") or {}).get("detail") or {}
    steps = (detail.get("timeline") or {}).get("steps") or {}
    out: dict[str, dict[str, float]] = {
        "steps": {k: v["end"] - v["start"] for k, v in steps.items() if "start" in v and "end" in v},
        "calls": {k: v["seconds"] for k, v in (detail.get("profile") or {}).items()},
        "queries": {},
    }
    for query in detail.get("queries") or []:
        name = query.get("query") or "?"
        out["queries"][f"{name} (whole)"] = out["queries"].get(f"{name} (whole)", 0.0) + (query.get("seconds") or 0.0)
        for phase, ms in (query.get("duration_ms") or {}).items():
            key = f"{name} {phase}"
            out["queries"][key] = out["queries"].get(key, 0.0) + ms / 1000
    return out


def medians(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    ok = [details(r) for r in runs if "error" not in r]
    out: dict[str, dict[str, float]] = {}
    for kind in ("steps", "calls", "queries"):
        keys = sorted({k for d in ok for k in d[kind]})
        out[kind] = {k: round(statistics.median([d[kind][k] for d in ok if k in d[kind]]), 3) for k in keys}
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.object_storage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="timed one-file increments per medium (default 5)")
    parser.add_argument("--initial-files", type=int, default=4, help="files of the untimed initial load (default 4)")
    parser.add_argument("--records-per-file", type=int, default=Plan.records_per_file,
                        help=f"records per landed file (default {Plan.records_per_file:,}, as the suite's)")
    parser.add_argument("--product", default="worktree",
                        help="which product code to measure: the working tree (default) or a git ref (e.g. HEAD)")
    parser.add_argument("--count-requests", action=argparse.BooleanOptionalAction, default=True,
                        help="then one more store increment through a server that logs its requests (default on)")
    parser.add_argument("--keep", action="store_true", help=f"keep the work folder ({WORKDIR}) afterwards")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.initial_files < 1:
        parser.error("--repeats and --initial-files must be at least 1")
    return args


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupted)  # so the running child and the server are stopped too
    args = parse_args(argv)
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {message}", flush=True)

    shutil.rmtree(WORKDIR, ignore_errors=True)
    WORKDIR.mkdir(parents=True)
    from benchmarks.run import use_product

    doc: dict[str, Any] = {"machine": machine_facts(), "repeats": args.repeats, "initial_files": args.initial_files,
                           "records_per_file": args.records_per_file, "target_ratio": TARGET_RATIO,
                           "server": SERVER, "contender": "lakehouse_assets"}
    doc["machine"]["product"] = use_product(args.product, WORKDIR / "product")
    plan = Plan(initial_files=args.initial_files, records_per_file=args.records_per_file)
    landing = WORKDIR / "landing"
    names = land_files(landing, plan, [(args.initial_files + args.repeats + 1, args.records_per_file)])
    contender = all_contenders()["lakehouse_assets"]
    from lakehouse_assets_tests.s3_server import s3_server

    lakes: list[Lakehouse] = []
    try:
        with s3_server(WORKDIR / "s3" / "data") as server:
            environment = server.environment()
            os.environ.update(environment)  # this process puts the store's landed files
            server.bucket(BUCKET)
            for medium in (DISK, STORE):
                ws = Workspace(WORKDIR / medium)
                ws.reset()
                contender.prepare(ws)
                lakes.append(disk_lakehouse(ws, landing) if medium == DISK else
                             store_lakehouse(ws, landing, environment))
            log(f"{SERVER} on {server.endpoint_url}; {args.initial_files} initial files, then {args.repeats} "
                f"one-file increments per medium, {args.records_per_file:,} records per file")
            doc["initial_load"] = {}
            for lake in lakes:
                lake.stage(names[: args.initial_files])
                doc["initial_load"][lake.medium] = run_once(contender, lake, "initial", WORKDIR / "state", log)
            for repeat in range(args.repeats):
                staged = names[: args.initial_files + repeat + 1]
                for lake in lakes if repeat % 2 == 0 else lakes[::-1]:
                    lake.stage(staged)
                    lake.runs.append(run_once(contender, lake, f"increment_{repeat + 1}", WORKDIR / "state", log))
            if args.count_requests:
                doc["counted_increment"] = counted_increment(contender, lakes[-1], names, log)
    finally:
        doc["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        doc["minutes"] = round((time.monotonic() - started) / 60, 1)
        doc["increment"] = {lake.medium: {**summarize(lake.runs), **medians(lake.runs)} for lake in lakes}
        doc["ratio"] = ratios(doc, lakes)
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{OUTPUT}.json").write_text(json.dumps(doc, indent=1) + "\n")
        (RESULTS / f"{OUTPUT}.md").write_text(markdown(doc))
        if not args.keep:
            shutil.rmtree(WORKDIR, ignore_errors=True)
    print(markdown(doc))
    log(f"done in {doc['minutes']} min: {RESULTS / OUTPUT}.json and .md")
    return 0


def ratios(doc: dict[str, Any], lakes: Sequence[Lakehouse]) -> dict[str, Any]:
    """Store over disk: of the medians, and the median of each repeat's pair (the two runs next
    to each other, so a change in the machine's load touches both)."""
    inc = doc["increment"]
    disk, store = (inc.get(m, {}).get("median_seconds") for m in (DISK, STORE))
    by_medium = {lake.medium: lake.runs for lake in lakes}
    pairs = [s["wall_seconds"] / d["wall_seconds"]
             for d, s in zip(by_medium.get(DISK, []), by_medium.get(STORE, []), strict=False)
             if "error" not in d and "error" not in s]
    ratio = round(store / disk, 3) if disk and store else None
    return {"of_medians": ratio, "paired_median": round(statistics.median(pairs), 3) if pairs else None,
            "paired": [round(p, 3) for p in pairs], "met": None if ratio is None else ratio <= TARGET_RATIO}


def markdown(doc: dict[str, Any]) -> str:
    inc, ratio, machine = doc["increment"], doc["ratio"], doc["machine"]

    def s(value: float | None) -> str:
        return "" if value is None else f"{value:.2f}"

    def times(a: float | None, b: float | None) -> str:
        return f"{b / a:.2f}×" if a and b else ""

    def load(values: Sequence[float] | None) -> str:
        return ", ".join(f"{x:.2f}" for x in values or ())

    run_loads = [r["loadavg_at_start"][0] for m in (DISK, STORE) for r in inc.get(m, {}).get("runs", [])
                 if "loadavg_at_start" in r]
    verdict = {True: "yes", False: "no", None: "not measured"}[ratio["met"]]
    lines = [
        f"# A one-file increment with the root on an S3-API store against a local disk (measured {machine['started']})",
        "",
        f"{machine['cpus']} CPUs, {machine.get('mem_total_gib', '?')} GiB; product {machine['product']['source']} at "
        f"`{machine['product']['commit']}` ({machine['product']['uncommitted_product_files']} uncommitted product "
        f"files); {doc['minutes']} minutes. Load average (1, 5, 15 min) at start {load(machine['loadavg_at_start'])}, "
        f"at end {load(machine.get('loadavg_at_end'))}; 1-minute load at the timed runs' starts "
        f"{min(run_loads, default=0):.2f} to {max(run_loads, default=0):.2f}.",
        "",
        f"Each lakehouse loaded {doc['initial_files']} files (not timed), then {doc['repeats']} times one more file of "
        f"{doc['records_per_file']:,} records landed on both and each ran the reference pipeline once (bronze -> "
        "silver + quarantine -> gold daily average, no checks; `dagster.materialize` in a fresh process and JVM), "
        f"disk and store alternating which goes first. The store is {doc['server']} on loopback (filesystem "
        "backend), root `s3a://lake/lakehouse`. See `benchmarks/object_storage.py`.",
        "",
        "| medium | median (whole process) | spread [min-max] | runs | ratio to disk | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    disk_median = inc.get(DISK, {}).get("median_seconds")
    for medium in (DISK, STORE):
        m = inc.get(medium) or {}
        sp = m.get("spread_seconds") or {}
        target = f"≤ {doc['target_ratio']}× disk" if medium == STORE else ""
        lines.append(f"| {LABELS[medium]} | {s(m.get('median_seconds'))} s | {s(sp.get('min'))}-{s(sp.get('max'))} s "
                     f"| {sp.get('n', 0)} ({m.get('failures', 0)} failed) | {times(disk_median, m.get('median_seconds'))} "
                     f"| {target} | {verdict if medium == STORE else ''} |")
    lines += ["", f"Store over disk, the median of each repeat's pair: {s(ratio['paired_median'])}× "
              f"({', '.join(f'{p:.2f}' for p in ratio['paired'])}).", "",
              "## Where the time goes (medians, s)", "",
              "Phases as the suite's `run_overhead` splits a run; they nest: the Dagster run (`dagster_materialize`) "
              "is its start, query work (the IO manager's reads and writes), Dagster's time inside the steps and its end.",
              "", "| what | disk | store | store - disk | ratio |", "|---|---|---|---|---|"]

    def row(name: str, a: float | None, b: float | None) -> str:
        diff = "" if a is None or b is None else f"{b - a:+.2f}"
        return f"| {name} | {s(a)} | {s(b)} | {diff} | {times(a, b)} |"

    lines.append(row("whole process", disk_median, inc.get(STORE, {}).get("median_seconds")))
    splits = {m: inc.get(m, {}).get("median_split") or {} for m in (DISK, STORE)}
    for phase in PHASES:
        if phase in splits[DISK] or phase in splits[STORE]:
            lines.append(row(phase, splits[DISK].get(phase), splits[STORE].get(phase)))
    for kind, prefix in (("steps", "step "), ("calls", "call "), ("queries", "query ")):
        keys = sorted({k for m in (DISK, STORE) for k in (inc.get(m, {}).get(kind) or {})})
        for key in keys:
            a, b = ((inc.get(m, {}).get(kind) or {}).get(key) for m in (DISK, STORE))
            if kind == "queries" and max(a or 0, b or 0) < 0.05:
                continue
            lines.append(row(f"{prefix}{key}", a, b))
    lines += ["", "Calls nest (a table's write includes its data files'); a query's phases are Structured Streaming's "
              "`durationMs` summed over its triggers (`latestOffset`: finding new data; `addBatch`: the batch and its "
              "sink; `walCommit`, `commitOffsets`: the checkpoint's offset and commit logs)."]
    lines += requests_table(doc.get("counted_increment"))
    lines += ["", "## Initial load (not timed into the medians)", "", "| medium | whole process |", "|---|---|"]
    for medium, record in (doc.get("initial_load") or {}).items():
        lines.append(f"| {LABELS[medium]} | {'failed' if 'error' in record else s(record.get('wall_seconds')) + ' s'} |")
    return "\n".join(lines) + "\n"


def requests_table(counted: dict[str, Any] | None) -> list[str]:
    if not counted or not counted.get("requests"):
        return []
    requests = counted["requests"]
    kinds = [k for k in ("LIST", "HEAD", "GET", "PUT", "COPY", "DELETE", "POST") if k in requests["all"]]
    wall = counted.get("wall_seconds")
    lines = ["", "## S3 requests of one increment on the store", "",
             f"One more one-file increment on the store, through a second s3proxy on the same folder logging each "
             f"request ({'failed' if counted.get('error') else f'{wall:.1f} s, not in the medians'}). COPY is a PUT "
             "that reads another object (S3A's rename: a copy, then a DELETE of the source).", "",
             "| what it touches | " + " | ".join(kinds) + " | all |", "|---|" + "---|" * (len(kinds) + 1)]
    for area in [*sorted(a for a in requests if a != "all"), "all"]:
        by_kind = requests[area]
        name = "**all**" if area == "all" else area
        lines.append(f"| {name} | " + " | ".join(str(by_kind.get(k, "")) for k in kinds) + f" | {by_kind['all']} |")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
