"""The contenders: each runs the reference pipeline (bronze -> silver with the patients join
and ``heartrate > 0`` -> gold daily average per patient and day, complete mode) as a child
process over a landing folder, into an output root of its own.

A contender is described to the parent by :class:`Contender`: how to prepare its folder once
and which command runs it once. The module of each contender also holds the code its child
process runs (``python -m benchmarks.contenders.<name>``).

Two kinds need something that outlives a run, started once per invocation by the parent
before their timed runs (:class:`benchmarks.scenarios.Bench`): contenders *on the engine*
(each run still a fresh process, attached to a warm Spark Connect engine whose URL the
parent passes in :data:`ENGINE_URL_ENV`), and *resident* ones (each run a request to one
long-lived child, see :class:`benchmarks.measure.ResidentChild`).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
#: Where the product's code comes from: the working tree, or a snapshot of a commit that
#: ``benchmarks.run --product REF`` unpacks (set through this variable for the parent only).
PRODUCT_ENV = "BENCH_PRODUCT_DIR"
VENV_BIN = str(Path(sys.executable).parent)
#: Set by the parent once its warm engine answers: the engine's Spark Connect URL, token
#: included (the runs' lakehouses are not the engine's, so they cannot read its token file).
ENGINE_URL_ENV = "BENCH_ENGINE_URL"

RECORDINGS = "recordings"
PATIENTS = "patients"


@dataclass(frozen=True)
class Workspace:
    """One contender's folder in one scenario: ``root`` is its lakehouse (landing files under
    ``root/landing``, outputs and checkpoints beside them); ``dir`` holds everything else
    (Dagster home, pipeline spec, logs)."""

    dir: Path

    @property
    def root(self) -> Path:
        return self.dir / "lakehouse"

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def logs(self) -> Path:
        return self.dir / "logs"

    def reset(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        (self.landing / RECORDINGS).mkdir(parents=True)
        (self.landing / PATIENTS).mkdir(parents=True)
        self.logs.mkdir(parents=True)


@dataclass(frozen=True)
class Contender:
    """How the parent runs one contender."""

    name: str
    label: str
    #: Module whose ``command(ws)`` gives the argv and extra environment of one run.
    module: str
    #: Extra arguments for the module's command (a variant of the same contender).
    options: Mapping[str, str] = field(default_factory=dict)
    #: Whether the contender processes only what is new (False: it recomputes everything).
    incremental: bool = True
    #: Whether its runs are requests to one long-lived child (``server_command`` and
    #: ``request`` of its module) instead of a process each.
    resident: bool = False

    @property
    def on_engine(self) -> bool:
        """Whether its runs attach to the invocation's warm Spark Connect engine."""
        return self.options.get("engine") == "connect"

    def command(self, ws: Workspace) -> tuple[list[str], dict[str, str], Path | None]:
        """argv, environment and working directory (None: the product's folder) of one run."""
        module = __import__(self.module, fromlist=["command"])
        argv, env, *cwd = module.command(ws, **dict(self.options))
        return argv, env, (cwd[0] if cwd else None)

    def prepare(self, ws: Workspace) -> None:
        module = __import__(self.module, fromlist=["prepare"])
        prepare = getattr(module, "prepare", None)
        if prepare is not None:
            prepare(ws, **dict(self.options))

    def server_command(self) -> tuple[list[str], dict[str, str]]:
        """argv and environment of a resident contender's long-lived child."""
        return __import__(self.module, fromlist=["server_command"]).server_command()

    def request(self, ws: Workspace) -> dict[str, object]:
        """What one run of a resident contender asks its child."""
        return __import__(self.module, fromlist=["request"]).request(ws, **dict(self.options))


def product_dir() -> Path:
    """The folder the product (``lakehouse_assets``, ``workspace.yaml``, ``instance/``) is
    imported from; children run with it as their working directory."""
    return Path(os.environ.get(PRODUCT_ENV) or REPO)


def base_env(**extra: str) -> dict[str, str]:
    """The environment every child gets: the venv first on PATH, its Python for Spark's
    workers, the product then the benchmarks importable (ahead of the editable install),
    nothing from the caller that would redirect the lakehouse."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEHOUSE_", "DAGSTER_", "BENCH_"))}
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    env["PYSPARK_PYTHON"] = PYTHON
    env["PYSPARK_DRIVER_PYTHON"] = PYTHON
    paths = list(dict.fromkeys([str(product_dir()), str(REPO)]))
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def stage_files(source_landing: Path, ws: Workspace, names: Iterable[str]) -> None:
    """Make landed recordings files (and the patients CSV) appear in the contender's landing
    folder: hard links, so every contender reads the very same bytes, and each appears at once."""
    src_patients = source_landing / PATIENTS / "patients.csv"
    dst_patients = ws.landing / PATIENTS / "patients.csv"
    if not dst_patients.exists():
        os.link(src_patients, dst_patients)
    for name in names:
        target = ws.landing / RECORDINGS / name
        if not target.exists():
            os.link(source_landing / RECORDINGS / name, target)


def all_contenders() -> dict[str, Contender]:
    """Every contender by name. ``lakehouse_assets+checks`` runs the quality checks (and their
    quarantine) as well; ``lakehouse_assets_cli`` goes through ``dagster asset materialize``;
    ``lakehouse_assets_connect`` attaches each run to the warm Spark Connect engine;
    ``plain_streaming_warm`` runs the hand-written Delta queries in one long-lived session;
    ``plain_streaming_parquet`` is the same script without Delta (run only when named)."""
    return {
        c.name: c
        for c in (
            Contender("lakehouse_assets", "lakehouse_assets (materialize, in process)",
                      "benchmarks.contenders.lakehouse_assets", {"checks": "off"}),
            Contender("lakehouse_assets_connect", "lakehouse_assets on a warm Spark Connect engine (materialize, in process)",
                      "benchmarks.contenders.lakehouse_assets", {"checks": "off", "engine": "connect"}),
            Contender("lakehouse_assets+checks", "lakehouse_assets with quality checks + quarantine",
                      "benchmarks.contenders.lakehouse_assets", {"checks": "on"}),
            Contender("lakehouse_assets_cli", "lakehouse_assets via `dagster asset materialize`",
                      "benchmarks.contenders.lakehouse_assets", {"checks": "off", "via": "cli"}),
            Contender("plain_streaming", "plain PySpark Structured Streaming with Delta Lake (availableNow, delta-spark)",
                      "benchmarks.contenders.plain_streaming"),
            Contender("plain_streaming_warm", "anchor: the same hand-written Delta queries in one warm, long-lived session",
                      "benchmarks.contenders.plain_streaming_warm", resident=True),
            Contender("plain_streaming_parquet", "plain PySpark Structured Streaming, Parquet sinks, no Delta (availableNow)",
                      "benchmarks.contenders.plain_streaming_parquet"),
            Contender("plain_batch", "plain PySpark batch with Delta Lake (one job over all files)",
                      "benchmarks.contenders.plain_batch", incremental=False),
            Contender("sdp", "Spark Declarative Pipelines (spark-pipelines run)",
                      "benchmarks.contenders.sdp"),
            Contender("spark_start", "anchor: bare SparkSession start",
                      "benchmarks.contenders.anchors", {"job": "none"}),
            Contender("spark_trivial", "anchor: SparkSession start + one trivial job",
                      "benchmarks.contenders.anchors", {"job": "trivial"}),
        )
    }
