"""Contender 1: lakehouse_assets itself, materialized through Dagster.

Two ways in:

- in process (``via=inprocess``): a child Python process imports the project's ``defs``,
  starts the SparkSession (what the lazy Spark resource would do in the run's first step, so
  its cost can be told apart), then calls ``dagster.materialize(...)`` on a persistent
  Dagster instance, as a run launched from the UI would log to;
- through the CLI (``via=cli``): ``dagster asset materialize -m lakehouse_assets.definitions
  --select ...``, so run start-up (code loading, instance, run creation) is included.

``checks=off`` selects the reference pipeline's assets (with the quarantine tables their steps
write) without their asset checks; ``checks=on`` runs the asset checks on them too.

``engine=connect`` attaches the run to the warm Spark Connect engine the parent started
(``LAKEHOUSE_SPARK_REMOTE`` set to its URL): the child then starts no session of its own
before the run, since a run on an engine opens its own session anyway (what a run launched
from the UI does), so its "session start" is nil and the run's connection is in the run.

The in-process child times the Delta IO manager's ``load_input`` and ``handle_output`` (the
Spark/Delta work) by wrapping them, and reads its run's events back from the instance, so the
parent can split a run into session start, Dagster overhead and query work.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.contenders import ENGINE_URL_ENV, PYTHON, VENV_BIN, Workspace, base_env, product_dir

#: The reference pipeline: bronze -> silver (with the patients lookup) -> gold daily average.
PIPELINE_ASSETS = (
    "bronze/recordings",
    "silver/patients",
    "silver/recordings_enriched",
    "gold/daily_patient_avg",
)


#: Set by the parent: the quarantine assets of the Definitions, comma-separated.
QUARANTINE_ENV = "BENCH_QUARANTINE_ASSETS"


def dagster_home(ws: Workspace) -> Path:
    return ws.dir / "dagster_home"


def prepare(ws: Workspace, **_: str) -> None:
    home = dagster_home(ws)
    home.mkdir(parents=True, exist_ok=True)
    # The project's own instance settings (telemetry off, one run at a time).
    instance_yaml = product_dir() / "instance" / "dagster.yaml"
    if instance_yaml.exists():
        (home / "dagster.yaml").write_text(instance_yaml.read_text())


def command(ws: Workspace, *, checks: str = "off", via: str = "inprocess",
            engine: str = "embedded") -> tuple[list[str], dict[str, str]]:
    env = base_env(LAKEHOUSE_ROOT=str(ws.root), DAGSTER_HOME=str(dagster_home(ws)))
    if engine == "connect":
        env["LAKEHOUSE_SPARK_REMOTE"] = engine_url()
    if via == "cli":
        # The quarantine tables the parent found in the Definitions (written by the same step).
        extra = [k for k in os.environ.get(QUARANTINE_ENV, "").split(",") if k]
        argv = [
            f"{VENV_BIN}/dagster", "asset", "materialize",
            "-m", "lakehouse_assets.definitions",
            "--select", ",".join([*PIPELINE_ASSETS, *extra]),
        ]
        return argv, env
    return [PYTHON, "-m", "benchmarks.contenders.lakehouse_assets", "run", "--checks", checks], env


def engine_url() -> str:
    """The warm engine's URL, token included, as the parent set it once the engine answered."""
    url = os.environ.get(ENGINE_URL_ENV)
    if not url:
        raise RuntimeError(f"no warm engine: {ENGINE_URL_ENV} is not set (the parent starts the engine first)")
    return url


# -- the child ------------------------------------------------------------------------------------


def _selection(defs: Any, checks: bool) -> tuple[list[Any], Any, dict[str, Any]]:
    """The reference pipeline's assets, with the quarantine tables their steps write too (a
    routed silver asset writes its quarantine in the same step and cannot be subset), and
    with or without the asset checks on them."""
    import dagster as dg

    keys = [dg.AssetKey(k.split("/")) for k in PIPELINE_ASSETS]
    assets = list(defs.assets or [])
    asset_checks = list(defs.asset_checks or [])
    graph = defs.resolve_asset_graph()
    quarantine = [k for k in graph.get_all_asset_keys() if any("quarantine" in part for part in k.path)]
    selection = dg.AssetSelection.assets(*keys, *quarantine)
    selected_checks = [c for c in graph.asset_check_keys if c.asset_key in set(keys) | set(quarantine)]
    info = {
        "checks_defined": len(list(graph.asset_check_keys)),
        "checks_selected": len(selected_checks) if checks else 0,
        "quarantine_assets": [k.to_user_string() for k in quarantine],
    }
    if not checks:
        return assets, selection.without_checks(), info
    return assets + asset_checks, selection, info


def _instrument(durations: dict[str, list[float]], queries: list[dict[str, Any]]) -> Any:
    """Time the Delta IO manager's reads and writes per asset, each streaming query's run
    (with Spark's own progress split), and the storage layer's main calls; nothing changes
    what they do."""
    import lakehouse_assets.io.handlers.query as query_module
    from benchmarks.contenders._profile import Timers, progress_summary
    from lakehouse_assets.io import DeltaIOManager

    def timed(kind: str, original: Any) -> Any:
        def wrapper(self: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return original(self, context, *args, **kwargs)
            finally:
                key = context.asset_key.to_user_string() if context.has_asset_key else "?"
                durations[f"{kind}:{key}"].append(time.monotonic() - started)

        return wrapper

    DeltaIOManager.handle_output = timed("handle_output", DeltaIOManager.handle_output)  # type: ignore[method-assign]
    DeltaIOManager.load_input = timed("load_input", DeltaIOManager.load_input)  # type: ignore[method-assign]

    original_run_stream = query_module.run_stream

    def run_stream(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        run = original_run_stream(*args, **kwargs)
        queries.append({
            "query": kwargs.get("query_name"),
            "seconds": round(time.monotonic() - started, 3),
            **progress_summary(run.progress),
        })
        return run

    query_module.run_stream = run_stream

    timers = Timers()
    from lakehouse_assets.io import delta_io_manager

    targets: list[tuple[Any, str]] = [(delta_io_manager, "table_metadata"), (query_module, "run_query")]
    # Column lineage (an explain of the plan: seconds in a cold JVM) and the look upstream
    # before a table's body runs (called through their modules' globals).
    if hasattr(delta_io_manager, "derived_lineage"):
        targets.append((delta_io_manager, "derived_lineage"))
    try:
        from lakehouse_assets.assets import table_asset

        targets += [(table_asset, name) for name in ("nothing_to_read", "nothing_new", "landed_files",
                                                     "unchanged_landing")
                    if hasattr(table_asset, name)]
    except ImportError:
        pass
    store_methods = ("write", "merge", "read", "read_stream", "schema", "_open", "_open_for_write", "history",
                     "replace_files")
    try:  # Delta Lake's connector (from issue 30 on)
        from lakehouse_assets.storage import delta

        targets += [(delta.DeltaTableStore, name) for name in store_methods]
    except ImportError:
        pass
    try:  # a snapshot from before: delta-rs commits
        from lakehouse_assets.storage import delta_rs

        targets += [(delta_rs.DeltaRsTableStore, name) for name in store_methods]
        targets.append((delta_rs, "stage_files"))
    except ImportError:
        pass
    try:  # a run's commits read back from each table's log, its one record of what the run
        # wrote (called through each module's globals; the event log is a view over them)
        from lakehouse_assets.io import run_report

        targets += [(run_report, "run_commits"), (query_module, "run_commits")]
    except ImportError:
        pass
    try:
        from lakehouse_assets.storage import sink

        targets.append((sink.DeltaSink, "__call__"))
        targets.append((sink, "run_commits"))
    except ImportError:
        pass
    try:  # on an engine: opening and releasing the run's session
        from lakehouse_assets.engine import client

        targets += [(client, "connect_session"), (client, "close_session")]
    except ImportError:
        pass
    try:
        from lakehouse_assets.assets import bronze
        from lakehouse_assets.ingestion import autoloader

        targets += [(bronze, "autoload_stream"), (autoloader, "resolve_schema")]
    except ImportError:
        pass
    timers.wrap_all(targets)
    return timers


def run_timeline(instance: Any, run_id: str) -> dict[str, Any]:
    """What a run's event log says: when the run and each step started and ended, and each
    materialization's rows and IO-manager duration (its own ``duration_seconds``)."""
    events: list[dict[str, Any]] = []
    steps: dict[str, dict[str, float]] = defaultdict(dict)
    run: dict[str, float] = {}
    materializations: dict[str, dict[str, Any]] = {}
    checks: dict[str, Any] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None:
            continue
        kind = event.event_type_value
        ts = entry.timestamp
        if kind in ("PIPELINE_STARTING", "RUN_STARTING"):
            run.setdefault("starting", ts)
        elif kind in ("PIPELINE_START", "RUN_START"):
            run["start"] = ts
        elif kind in ("PIPELINE_SUCCESS", "RUN_SUCCESS", "PIPELINE_FAILURE", "RUN_FAILURE"):
            run["end"] = ts
            run["status"] = kind
        elif kind == "STEP_START":
            steps[entry.step_key]["start"] = ts
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE"):
            steps[entry.step_key]["end"] = ts
        elif kind == "ASSET_MATERIALIZATION":
            mat = entry.asset_materialization
            if mat is not None:
                meta = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
                materializations[mat.asset_key.to_user_string()] = {
                    k: meta.get(k) for k in ("rows_processed", "rows_written", "micro_batches", "duration_seconds", "dagster/row_count")
                    if k in meta
                }
        elif kind == "ASSET_CHECK_EVALUATION":
            data = event.event_specific_data
            checks[f"{data.asset_key.to_user_string()}:{data.check_name}"] = bool(data.passed)
        events.append(1)
    return {
        "run": run,
        "steps": dict(steps),
        "materializations": materializations,
        "checks": checks,
        "events": len(events),
    }


def _run(args: argparse.Namespace) -> int:
    from benchmarks.measure import Phases

    phases = Phases()
    phases.mark("child_start")
    import dagster as dg

    from lakehouse_assets.definitions import defs
    from lakehouse_assets.settings import LakehouseSettings
    from lakehouse_assets.spark import build_spark_session

    assets, selection, info = _selection(defs, args.checks == "on")
    phases.value("selection", info)
    durations: dict[str, list[float]] = defaultdict(list)
    queries: list[dict[str, Any]] = []
    timers = _instrument(durations, queries)
    phases.mark("imported")

    # Embedded, the run reuses this session: starting it first tells the JVM's start apart.
    # On an engine the run opens a session of its own whatever happens here.
    settings = LakehouseSettings.from_env()
    on_engine = bool(settings.spark_remote)
    spark = None if on_engine else build_spark_session(settings)
    phases.mark("session_started")

    # From here on is what a run costs: opening the instance, the run, its steps.
    phases.mark("materialize_start")
    instance = dg.DagsterInstance.get()
    result = dg.materialize(
        assets, selection=selection, resources=dict(defs.resources or {}), instance=instance, raise_on_error=True
    )
    phases.mark("materialize_end")
    phases.value("io_seconds", {k: round(sum(v), 3) for k, v in durations.items()})
    phases.value("queries", queries)
    phases.value("profile", timers.report())
    phases.value("timeline", run_timeline(instance, result.run_id))
    if spark is not None:
        spark.stop()
    phases.mark("session_stopped")
    return 0 if result.success else 1


def _timeline(args: argparse.Namespace) -> int:
    """For a CLI run: read the last run of ``$DAGSTER_HOME`` back and print its timeline."""
    import dagster as dg

    instance = dg.DagsterInstance.get()
    records = instance.get_run_records(limit=1)
    if not records:
        print("{}")
        return 1
    print(json.dumps(run_timeline(instance, records[0].dagster_run.run_id)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.contenders.lakehouse_assets")
    sub = parser.add_subparsers(dest="what", required=True)
    run = sub.add_parser("run", help="materialize the reference pipeline in process")
    run.add_argument("--checks", choices=("on", "off"), default="off")
    sub.add_parser("timeline", help="print the last run's timeline from $DAGSTER_HOME")
    args = parser.parse_args(argv)
    return _run(args) if args.what == "run" else _timeline(args)


if __name__ == "__main__":
    sys.exit(main())
