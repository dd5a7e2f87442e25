"""Anchor: the hand-written Structured Streaming script of :mod:`plain_streaming`, warm.

One long-lived child process starts its SparkSession once (Delta Lake's connector included,
as in the cold script) and then runs the very same three Delta queries
(:func:`plain_streaming.run_pipeline`) on command, once per timed run, over the lakehouse
folder it is given: JVM start, Delta's classes and JIT warm-up are paid once, before the
timed runs, as on a warm Spark Connect engine. What a long-lived session keeps between runs,
Delta's cache of table logs included, it keeps here too. Each request is timed from the
parent's command to the child's answer (see :class:`benchmarks.measure.ResidentChild`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.contenders import PYTHON, Workspace, base_env


def server_command() -> tuple[list[str], dict[str, str]]:
    """argv and environment of the long-lived child."""
    return [PYTHON, "-m", "benchmarks.contenders.plain_streaming_warm"], base_env()


def request(ws: Workspace, **_: str) -> dict[str, Any]:
    """What one run asks the child: the queries over this contender's lakehouse."""
    return {"root": str(ws.root)}


def main() -> int:
    from benchmarks.contenders._spark import plain_session
    from benchmarks.contenders.plain_streaming import run_pipeline
    from benchmarks.measure import Phases, serve_requests

    spark = plain_session("plain_streaming_warm")

    def handle(req: Mapping[str, Any], phases: Phases) -> None:
        # The session is up and everything imported when a request arrives: a warm run's
        # start and imports are nil by construction.
        phases.mark("imported")
        phases.mark("session_started")
        run_pipeline(spark, Path(req["root"]), phases)

    try:
        return serve_requests(handle)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
