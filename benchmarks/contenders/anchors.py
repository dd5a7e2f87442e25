"""Anchors, not contenders: what any Spark program pays before doing work.

``job=none``: a bare SparkSession start (and stop); ``job=trivial``: the same plus one
trivial job (``spark.range(1).count()``). Same master and settings as the other contenders,
Delta Lake's connector included (its jars and SQL extension), as every lakehouse_assets
session has it: the anchors start what a Delta Lake program starts.
"""

from __future__ import annotations

import sys

from benchmarks.contenders import PYTHON, Workspace, base_env


def command(ws: Workspace, *, job: str = "none") -> tuple[list[str], dict[str, str]]:
    return [PYTHON, "-m", "benchmarks.contenders.anchors", job], base_env()


def main(job: str) -> int:
    from benchmarks.measure import Phases

    phases = Phases()
    phases.mark("child_start")
    from benchmarks.contenders._spark import plain_session

    phases.mark("imported")
    spark = plain_session("anchor")
    phases.mark("session_started")
    if job == "trivial":
        spark.range(1).count()
        phases.mark("job_done")
    spark.stop()
    phases.mark("session_stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "none"))
