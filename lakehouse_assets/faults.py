"""Named fault points, so crash tests can kill a run at an exact moment.

``LAKEHOUSE_FAULT=<point>:<hit>`` makes the process kill itself with SIGKILL the
``<hit>``-th time it reaches ``<point>`` (``<hit>`` defaults to 1); a process that leads its own
process group (the crash harness starts runs that way) kills the whole group, Spark's JVM
included, as a power cut would. In process, :func:`raising_at` arms a point to raise
:class:`InjectedFault` instead, which stops a run as the kill would without a process and a JVM
to start per fault (docs/reliability.md). Without either, a fault point costs one attribute check.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

ENV_VAR = "LAKEHOUSE_FAULT"

# Where a run can be cut, in the order a micro-batch meets them.
POINTS = {
    "batch.started": "a micro-batch's offsets are in the checkpoint, nothing is written yet",
    "delta.files_written": "a batch's write is under way, its Delta commit is not made",
    "delta.committed": "the Delta commit is done, the checkpoint does not record the batch yet",
    "cdc.table_committed": "an AUTO CDC batch's table is committed, its state is not",
    "asset.materialized": "one asset's table is written, the next asset has not started",
    "replay.table_committed": "a quarantine replay's rows are in the table, not yet out of the quarantine",
}

_lock = threading.Lock()
_hits: dict[str, int] = {}
# The point and hit armed in process by `raising_at`, if any.
_raising: tuple[str, int] | None = None


class InjectedFault(Exception):
    """Raised at a fault point armed by :func:`raising_at`, where a kill would have landed."""


@contextmanager
def raising_at(point: str, hit: int = 1) -> Iterator[None]:
    """Within the block, the ``hit``-th arrival of this process at ``point`` raises
    :class:`InjectedFault` (from whichever thread reaches it: Spark calls ``foreachBatch``
    functions from its own)."""
    global _raising
    if point not in POINTS:
        raise ValueError(f"{point!r} names no fault point; known points: {', '.join(POINTS)}")
    with _lock:
        _hits.pop(point, None)
        _raising = (point, hit)
    try:
        yield
    finally:
        with _lock:
            _raising = None
            _hits.pop(point, None)


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
    """Die here, by SIGKILL, if ``LAKEHOUSE_FAULT`` arms this point for this hit (or raise
    :class:`InjectedFault`, if :func:`raising_at` does)."""
    raising = _raising  # read once: the block arming it may end meanwhile
    armed = raising or (armed_fault() if ENV_VAR in os.environ else None)
    if armed is None or armed[0] != point:
        return
    with _lock:
        _hits[point] = _hits.get(point, 0) + 1
        if _hits[point] != armed[1]:
            return
    if raising is not None:
        raise InjectedFault(f"fault injected at {point} (arrival {armed[1]}): {POINTS[point]}")
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
