"""Named fault points, so crash tests can kill a run at an exact moment.

``LAKEHOUSE_FAULT=<point>:<hit>`` makes the process kill itself with SIGKILL the
``<hit>``-th time it reaches ``<point>`` (``<hit>`` defaults to 1). When the process leads
its own process group (the crash harness starts runs that way), the whole group is killed,
Spark's JVM included, as a power cut would. Without the variable a fault point costs one
attribute check.
"""

from __future__ import annotations

import os
import signal
import threading

ENV_VAR = "LAKEHOUSE_FAULT"

# Where a run can be cut, in the order a micro-batch meets them.
POINTS = {
    "batch.started": "a micro-batch's offsets are in the checkpoint, nothing is written yet",
    "delta.files_written": "a batch's write is under way, its Delta commit is not made",
    "delta.committed": "the Delta commit is done, the checkpoint does not record the batch yet",
    "cdc.table_committed": "an AUTO CDC batch's table is committed, its state is not",
    "aggregate.table_committed": "an incremental aggregate's table is committed, its state is not",
    "asset.materialized": "one asset's table is written, the next asset has not started",
    "replay.table_committed": "a quarantine replay's rows are in the table, not yet out of the quarantine",
}

_lock = threading.Lock()
_hits: dict[str, int] = {}


def armed_fault() -> tuple[str, int] | None:
    """The fault point and hit number ``LAKEHOUSE_FAULT`` names, if any."""
    spec = os.environ.get(ENV_VAR, "").strip()
    if not spec:
        return None
    point, _, hit = spec.partition(":")
    if point not in POINTS:
        raise ValueError(f"{ENV_VAR}={spec!r} names no fault point; known points: {', '.join(POINTS)}")
    return point, int(hit or 1)


def fault_point(point: str) -> None:
    """Die here, by SIGKILL, if ``LAKEHOUSE_FAULT`` arms this point for this hit."""
    if ENV_VAR not in os.environ:
        return
    armed = armed_fault()
    if armed is None or armed[0] != point:
        return
    with _lock:
        _hits[point] = _hits.get(point, 0) + 1
        if _hits[point] != armed[1]:
            return
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
