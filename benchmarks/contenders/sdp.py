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


def project(ws: Workspace) -> Path:
    return ws.dir / "sdp"


def prepare(ws: Workspace, **_: str) -> None:
    folder = project(ws)
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "transformations").mkdir(parents=True)
    for source in DEFINITIONS.glob("*.py"):
        shutil.copy(source, folder / "transformations" / source.name)
    # Only SQL settings: a flow sets these on its session, and refuses any other kind.
    conf = {k: v for k, v in spark_conf().items() if k.startswith("spark.sql.")}
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


def command(ws: Workspace, **_: str) -> tuple[list[str], dict[str, str], Path]:
    """``spark-pipelines run`` with as few settings on the command line as will do.

    pyspark 4.2 hands spark-submit's settings to the Connect server it starts in chunks of
    ten environment variables, and ``_start_connect_server`` keeps only the last chunk: past
    ten settings (six are spark-submit's own), the Hive catalog and warehouse are lost and
    the second run fails. So: driver memory, no UI, the catalog and the warehouse; the SQL
    settings go in the spec. The Derby metastore (metastore_db/, derby.log) goes in the
    working directory, the pipeline's folder.
    """
    folder = project(ws)
    argv = [
        f"{VENV_BIN}/spark-pipelines",
        "--driver-memory", spark_conf()["spark.driver.memory"],
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.catalogImplementation=hive",
        "--conf", f"spark.sql.warehouse.dir={folder / 'warehouse'}",
        "run", "--spec", str(folder / "spark-pipeline.yml"),
    ]
    return argv, base_env(BENCH_SDP_LANDING=str(ws.landing)), folder


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
