"""Contender 4: Spark Declarative Pipelines, ``spark-pipelines run`` (pyspark 4.2).

The definitions are ``sdp_pipeline/transformations/reference_pipeline.py`` (streaming tables
for bronze and silver, a materialized view for gold); :func:`prepare` copies them next to a
``spark-pipeline.yml`` written for the contender's folder. Open-source SDP keeps its tables in
the session catalog, so an incremental second run needs a catalog that outlives the process:
the run uses Spark's Hive catalog on a local Derby metastore in the folder (with the default
in-memory catalog the second run fails with LOCATION_ALREADY_EXISTS). spark-pipelines runs a
local Spark Connect server, whose master is local[*]: the same 2 cores here as local[2].

The CLI logs timestamped steps (session, graph, registration, each flow); the parent reads
them back as phases.
"""

from __future__ import annotations

import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.contenders import VENV_BIN, Workspace, base_env

from benchmarks.contenders._spark import spark_conf

DEFINITIONS = Path(__file__).resolve().parent / "sdp_pipeline" / "transformations"

# Settings that must be there when the JVM starts (the rest go in the spec).
STATIC_CONF = ("spark.driver.memory", "spark.ui.enabled", "spark.ui.showConsoleProgress",
               "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "spark.default.parallelism",
               "spark.python.worker.reuse", "spark.sql.streaming.numRecentProgressUpdates")


def project(ws: Workspace) -> Path:
    return ws.dir / "sdp"


def prepare(ws: Workspace, **_: str) -> None:
    folder = project(ws)
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "transformations").mkdir(parents=True)
    for source in DEFINITIONS.glob("*.py"):
        shutil.copy(source, folder / "transformations" / source.name)
    conf = {k: v for k, v in spark_conf().items() if k not in STATIC_CONF}
    lines = [
        "name: reference_pipeline",
        f"storage: file://{folder / 'storage'}",
        "configuration:",
        *[f'  {key}: "{value}"' for key, value in sorted(conf.items())],
        "libraries:",
        "  - glob:",
        "      include: transformations/**",
        "",
    ]
    (folder / "spark-pipeline.yml").write_text("\n".join(lines))
    (folder / "conf").mkdir()
    (folder / "conf" / "spark-defaults.conf").write_text(_static_conf(folder))


def command(ws: Workspace, **_: str) -> tuple[list[str], dict[str, str], Path]:
    folder = project(ws)
    argv = [f"{VENV_BIN}/spark-pipelines", "run", "--spec", str(folder / "spark-pipeline.yml")]
    env = base_env(BENCH_SDP_LANDING=str(ws.landing), SPARK_CONF_DIR=str(folder / "conf"))
    return argv, env, folder


def _static_conf(folder: Path) -> str:
    """spark-defaults.conf for both JVMs of a run (spark-submit's and its Connect server's).

    Not ``--conf``: spark-pipelines hands its options on to the Connect server it starts, and
    some values (a JDBC URL, Java options, even spark.default.parallelism) make it drop all of
    them, the Hive catalog included. The Derby metastore (metastore_db/, derby.log) goes in
    the working directory, the pipeline's folder.
    """
    static = {k: v for k, v in spark_conf().items() if k in STATIC_CONF}
    static.update({
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(folder / "warehouse"),
    })
    return "".join(f"{key} {value}\n" for key, value in sorted(static.items()))


_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}): (.*)$")
_MARKS = {
    "Creating Spark session...": "session_start",
    "Creating dataflow graph...": "session_started",
    "Registering graph elements...": "graph_created",
    "Starting run...": "definitions_registered",
    "Run is COMPLETED.": "run_completed",
}
_FLOW = re.compile(r"Flow (\S+) (?:is|has) (STARTING|COMPLETED)")


def phases_from_log(log_path: str | Path) -> dict[str, Any]:
    """The CLI's own timestamped steps (whole seconds) as marks, like the Python children's."""
    marks: dict[str, float] = {}
    completed = False
    for line in Path(log_path).read_text(errors="replace").splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        ts = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
        message = match.group(2)
        if message in _MARKS:
            marks.setdefault(_MARKS[message], ts)
            completed = completed or message == "Run is COMPLETED."
        flow = _FLOW.search(message)
        if flow:
            table = flow.group(1).rsplit(".", 1)[-1]
            marks[f"{table}_{flow.group(2).lower()}"] = ts
    return {"marks": marks, "values": {"completed": completed}}
