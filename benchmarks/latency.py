"""Land -> gold latency with ``dagster dev`` running: the real daemon, default intervals.

The project's ``dagster dev`` (workspace.yaml, the instance settings ``make run`` uses, and
the default sensor intervals) runs on a lakehouse of its own. After a warm-up that carries
the first files all the way to gold, each sample lands one new file with the simulator (so
the file appears as a real landing would, with a fresh modification time) and measures the
seconds until ``gold/daily_patient_avg`` contains it. The data set has one file per day of
2020 (``files_per_year=366``), so "contains it" is exact: gold has a row for that file's day.

Each sample also says where the time went, from the runs in the Dagster instance: waiting
for the landing sensor's tick, the bronze run (queued, launched, ran), waiting for the
automation sensor's tick, the silver + gold run.

Two variants, each when its contender is wanted: ``latency`` (``lakehouse_assets``: every run
of dagster dev starts its own Spark) and ``latency_connect`` (``lakehouse_assets_connect``:
dagster dev's runs attach to the invocation's warm Spark Connect engine, as ``make run`` does).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.contenders import PYTHON, REPO, VENV_BIN, Workspace, base_env, product_dir
from benchmarks.measure import median, spread

FILES_PER_YEAR = 366  # one file per day: a file is in gold when its day is
YEAR_START = 1_577_836_800
DAY = 86_400
POLL_SECONDS = 0.5
#: After a sample, how long its runs may take to finish (checks, other tables) and how often
#: the instance is asked (each ask is a Python process importing Dagster).
RUNS_END_TIMEOUT_SECONDS = 300
RUNS_POLL_SECONDS = 3
#: Kept free of samples at the end of the time budget: stopping dagster dev (its daemon waits
#: for the run in progress) took 75 s on 2 cores.
STOP_RESERVE_SECONDS = 90


class DagsterDev:
    """``dagster dev`` on a free local port, started in its own session and stopped by it."""

    def __init__(self, *, dagster_home: Path, lakehouse_root: Path, log_path: Path, port: int | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.dagster_home = dagster_home
        self.lakehouse_root = lakehouse_root
        self.log_path = log_path
        self.port = port or _free_port()
        self.extra_env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None

    def __enter__(self) -> DagsterDev:
        self.start_seconds = self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 240) -> float:
        """Start it and wait until the webserver answers; the seconds that took."""
        self.dagster_home.mkdir(parents=True, exist_ok=True)
        instance_yaml = product_dir() / "instance" / "dagster.yaml"
        if instance_yaml.exists():
            (self.dagster_home / "dagster.yaml").write_text(instance_yaml.read_text())
        env = base_env(DAGSTER_HOME=str(self.dagster_home), LAKEHOUSE_ROOT=str(self.lakehouse_root), **self.extra_env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed with the process
        started = time.monotonic()
        self.process = subprocess.Popen(
            [f"{VENV_BIN}/dagster", "dev", "-h", "127.0.0.1", "-p", str(self.port), "-w", str(product_dir() / "workspace.yaml")],
            cwd=product_dir(), env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        log.close()
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(f"dagster dev exited with {self.process.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/server_info", timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(1)
        self.stop()
        raise TimeoutError(f"dagster dev did not answer within {timeout} s; see {self.log_path}")

    def stop(self, timeout: float = 60) -> None:
        """Ask it to stop (SIGINT, as Ctrl-C would: it stops its daemon and webserver), then
        make sure nothing of its own process group is left."""
        if self.process is None or self.process.poll() is not None:
            return
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # run workers it launched stay in its process group
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class SharedDeployment:
    """The project's own ``dagster dev`` helper (``lakehouse_assets_tests/e2e/dagster_dev.py``),
    used when it is there and the product is the working tree; with the default sensor
    interval and Spark settings, so what runs is what ``make run`` runs."""

    def __init__(self, deployment_class: Any, *, dagster_home: Path, lakehouse_root: Path, log_dir: Path,
                 env: dict[str, str] | None = None) -> None:
        from lakehouse_assets.settings import DEFAULT_SENSOR_INTERVAL_SECONDS

        self.deployment = deployment_class(
            home=dagster_home, root=lakehouse_root, log_dir=log_dir,
            sensor_interval_seconds=DEFAULT_SENSOR_INTERVAL_SECONDS, spark_conf={}, env=env,
        )
        self.port = self.deployment.port
        self.start_seconds: float | None = None
        self.stop_report = ""

    def __enter__(self) -> SharedDeployment:
        started = time.monotonic()
        self.deployment.start_dev()
        self.deployment.wait_until_loaded(timeout=300)
        self.start_seconds = time.monotonic() - started
        return self

    def __exit__(self, *exc: object) -> None:
        report = self.deployment.stop()
        self.stop_report = report.describe()


def deployment(*, dagster_home: Path, lakehouse_root: Path, log_dir: Path, env: dict[str, str] | None = None) -> Any:
    """``dagster dev`` for the latency scenario: the project's e2e helper when it exists (and
    the working tree is what is measured), else :class:`DagsterDev`; ``env`` is added to its
    environment (the warm engine's ``LAKEHOUSE_SPARK_REMOTE``)."""
    if product_dir() == REPO:
        try:
            from lakehouse_assets_tests.e2e.dagster_dev import DagsterDeployment
        except ImportError:
            DagsterDeployment = None  # noqa: N806
        if DagsterDeployment is not None:
            return SharedDeployment(DagsterDeployment, dagster_home=dagster_home, lakehouse_root=lakehouse_root,
                                    log_dir=log_dir, env=env)
    return DagsterDev(dagster_home=dagster_home, lakehouse_root=lakehouse_root, log_path=log_dir / "dagster_dev.log", env=env)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gold_days(table: Path) -> set[int]:
    """The days (index in 2020, from 1) present in gold/daily_patient_avg: the table's live
    files from its Delta log, then one column of each with pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    days: set[int] = set()
    for path in live_files(table):
        try:
            column = pq.read_table(path, columns=["date"]).column("date")
        except (OSError, KeyError, pa.ArrowInvalid):
            continue
        if not pa.types.is_timestamp(column.type):
            continue
        per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[column.type.unit]
        for value in column.cast(pa.int64()).to_pylist():
            if value is not None:
                days.add((value // per_second - YEAR_START) // DAY + 1)
    return days


def live_files(table: Path) -> list[Path]:
    """The data files of the table's latest version, by replaying its JSON commits (the
    complete-mode gold table has few versions here); through delta-rs when the log has a
    checkpoint."""
    log = table / "_delta_log"
    if not log.is_dir():
        return []
    if (log / "_last_checkpoint").exists():
        from deltalake import DeltaTable

        return [Path(uri.removeprefix("file://")) for uri in DeltaTable(str(table)).file_uris()]
    live: dict[str, None] = {}
    for commit in sorted(log.glob("[0-9]*.json")):
        try:
            lines = commit.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = None
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    from urllib.parse import unquote

    return [table / unquote(path) for path in live]


def _log_version(table: Path) -> int:
    log = table / "_delta_log"
    if not log.is_dir():
        return -1
    versions = [int(p.name.split(".")[0]) for p in log.glob("*.json") if p.name.split(".")[0].isdigit()]
    return max(versions, default=-1)


def wait_for_day(table: Path, day: int, timeout: float) -> float | None:
    """Seconds until ``day`` is in gold (None on timeout); reads gold only when its log moves."""
    started = time.monotonic()
    seen = -2
    while time.monotonic() - started < timeout:
        version = _log_version(table)
        if version != seen:
            seen = version
            if day in gold_days(table):
                return time.monotonic() - started
        time.sleep(POLL_SECONDS)
    return None


def runs_since(ws: Workspace, dagster_home: Path, since: float) -> list[dict[str, Any]]:
    """The runs the instance created after ``since``: what they materialized and when."""
    code = (
        "import json, sys\n"
        "import dagster as dg\n"
        "since = float(sys.argv[1])\n"
        "inst = dg.DagsterInstance.get()\n"
        "out = []\n"
        "for r in inst.get_run_records(limit=50):\n"
        "    if r.create_timestamp.timestamp() < since: continue\n"
        "    run = r.dagster_run\n"
        "    sel = sorted(k.to_user_string() for k in (run.asset_selection or []))\n"
        "    out.append({'run_id': run.run_id[:8], 'assets': sel, 'status': run.status.value,\n"
        "                'created': r.create_timestamp.timestamp(), 'started': r.start_time, 'ended': r.end_time,\n"
        "                'sensor': run.tags.get('dagster/sensor_name')})\n"
        "print(json.dumps(sorted(out, key=lambda x: x['created'])))\n"
    )
    env = base_env(DAGSTER_HOME=str(dagster_home), LAKEHOUSE_ROOT=str(ws.root))
    try:
        out = subprocess.run([PYTHON, "-c", code, str(since)], env=env, cwd=product_dir(), capture_output=True, text=True, timeout=300)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError):
        return []


def wait_until_runs_end(ws: Workspace, dagster_home: Path, since: float, timeout: float = RUNS_END_TIMEOUT_SECONDS) -> list[dict[str, Any]]:
    """The runs created after ``since``, once none of them is queued or running any more (or
    after ``timeout``): their end times complete the breakdown, and the next sample then lands
    on an idle deployment."""
    deadline = time.monotonic() + timeout
    while True:
        runs = runs_since(ws, dagster_home, since)
        if all(r.get("ended") for r in runs) or time.monotonic() > deadline:
            return runs
        time.sleep(RUNS_POLL_SECONDS)


def breakdown(landed: float, seen: float | None, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Split one sample's latency along the runs it took: one run from bronze to gold (the
    landing sensor asks for the tables downstream too), or a bronze run and then the
    automation sensor's silver + gold run."""
    out: dict[str, Any] = {"runs": runs}
    bronze = next((r for r in runs if "bronze/recordings" in r["assets"]), None)
    downstream = next((r for r in runs if "gold/daily_patient_avg" in r["assets"]), None)

    def d(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(b - a, 2)

    if bronze:
        out["landing_sensor_wait"] = d(landed, bronze["created"])
        out["bronze_queue_and_launch"] = d(bronze["created"], bronze["started"])
    if bronze and bronze is downstream:
        out["run_start_to_gold_visible"] = d(bronze["started"], seen)
        out["whole_run"] = d(bronze["started"], bronze["ended"])
        return out
    if bronze:
        out["bronze_run"] = d(bronze["started"], bronze["ended"])
    if downstream:
        out["automation_sensor_wait"] = d(bronze["ended"] if bronze else landed, downstream["created"])
        out["downstream_queue_and_launch"] = d(downstream["created"], downstream["started"])
        out["silver_gold_run"] = d(downstream["started"], downstream["ended"])
        out["gold_visible_after_run_end"] = d(downstream["ended"], seen)
    return out


#: Result key of each variant, by the contender whose runs it is made of.
VARIANTS = {"lakehouse_assets_connect": "latency_connect", "lakehouse_assets": "latency"}


def run_latency(bench: Any) -> None:
    """The latency scenario (``bench`` is a :class:`benchmarks.scenarios.Bench`): the variant
    on the warm engine first (its target is the new one), then the embedded one, each when its
    contender is wanted."""
    from benchmarks.engine import EngineFailed

    for contender, key in VARIANTS.items():
        if bench.only is not None and contender not in bench.only:
            continue
        # Embedded means embedded, whatever engine the caller's own environment names.
        env: dict[str, str] = {"LAKEHOUSE_SPARK_REMOTE": ""}
        if contender == "lakehouse_assets_connect":
            try:
                env["LAKEHOUSE_SPARK_REMOTE"] = bench.engine().url()
            except EngineFailed as exc:
                bench.results[key] = {"error": str(exc), "samples": []}
                continue
        bench.results[key] = _latency_variant(bench, contender, env)


def _latency_variant(bench: Any, contender: str, env: dict[str, str]) -> dict[str, Any]:
    from lakehouse_assets.simulator import land

    plan = bench.plan
    log: Callable[[str], None] = bench.log
    ws = Workspace(bench.workdir / "latency" / f"{contender}_dev")
    ws.reset()
    home = ws.dir / "dagster_home"
    gold = ws.root / "gold" / "daily_patient_avg"
    options = dict(records_per_file=plan.records_per_file, bad_rate=plan.bad_rate, seed=plan.seed,
                   files_per_year=FILES_PER_YEAR)
    samples: list[dict[str, Any]] = []
    result: dict[str, Any] = {"contender": contender, "samples": samples, "sensor_interval_seconds": _default_interval(),
                              "engine": "warm Spark Connect engine" if env.get("LAKEHOUSE_SPARK_REMOTE")
                              else "embedded (a Spark per run)"}
    dev_cm = deployment(dagster_home=home, lakehouse_root=ws.root, log_dir=ws.logs, env=env)
    result["helper"] = type(dev_cm).__name__
    with dev_cm as dev:
        result["dagster_dev_start_seconds"] = round(dev.start_seconds or 0, 2)
        log(f"latency ({contender}): dagster dev on port {dev.port}; warm-up with {plan.latency_warmup_files} file(s)")
        warm_epoch = time.time()
        warm = land(ws.landing, files=plan.latency_warmup_files, **options)
        started = time.monotonic()
        warm_day = warm.files[-1].index
        waited = wait_for_day(gold, warm_day, timeout=600)
        result["warmup_seconds"] = None if waited is None else round(time.monotonic() - started, 2)
        if waited is None:
            result["error"] = "the warm-up files never reached gold within 600 s"
            log("  " + result["error"])
            return result
        wait_until_runs_end(ws, home, warm_epoch - 1)  # the first sample lands on an idle deployment
        log(f"  warm-up reached gold in {result['warmup_seconds']} s")
        for i in range(plan.latency_samples):
            left = bench.seconds_left()
            longest = max((s["seconds"] or 0 for s in samples), default=0)
            if i >= plan.latency_min_samples and left is not None and left < 1.2 * longest + STOP_RESERVE_SECONDS:
                result["stopped_early"] = (f"{i} of {plan.latency_samples} samples: {left:.0f} s of the suite's time "
                                           f"budget left, and a sample takes up to {longest:.0f} s")
                log("  " + result["stopped_early"])
                break
            time.sleep(1)
            landed_epoch = time.time()
            landed = land(ws.landing, files=1, **options)
            day = landed.files[0].index
            seconds = wait_for_day(gold, day, timeout=600)
            seen_epoch = None if seconds is None else landed_epoch + seconds
            sample = {"file": landed.files[0].path.name, "seconds": None if seconds is None else round(seconds, 2)}
            sample.update(breakdown(landed_epoch, seen_epoch, wait_until_runs_end(ws, home, landed_epoch - 1)))
            samples.append(sample)
            log(f"  sample {i + 1}: {sample['seconds']} s")
    result["stop_report"] = getattr(dev_cm, "stop_report", "")
    values = [s["seconds"] for s in samples if s["seconds"] is not None]
    result["median_seconds"] = None if not values else round(median(values), 2)
    result["spread_seconds"] = spread(values)
    keys = ("landing_sensor_wait", "bronze_queue_and_launch", "run_start_to_gold_visible", "whole_run", "bronze_run",
            "automation_sensor_wait", "downstream_queue_and_launch", "silver_gold_run", "gold_visible_after_run_end")
    result["median_breakdown"] = {
        k: round(median([s[k] for s in samples if s.get(k) is not None]) or 0, 2) for k in keys
        if any(s.get(k) is not None for s in samples)
    }
    return result


def _default_interval() -> int:
    from lakehouse_assets.settings import DEFAULT_SENSOR_INTERVAL_SECONDS

    return DEFAULT_SENSOR_INTERVAL_SECONDS


def utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%H:%M:%S")
