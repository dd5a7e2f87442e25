"""Light profiling inside a contender's child: wall-clock totals of named functions, and the
Structured Streaming progress of each query (where Spark says a trigger spent its time).

Functions are wrapped in the child process only, without changing any code they belong to.
Totals nest (a table's write includes its data files' write): read them as a tree.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any


class Timers:
    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.missing: list[str] = []

    def wrap(self, owner: Any, attr: str, label: str | None = None) -> None:
        """Time every call of ``owner.attr`` (an instance method or a module function)."""
        name = label or f"{getattr(owner, '__name__', type(owner).__name__)}.{attr}"
        original = getattr(owner, attr, None)
        if original is None or not callable(original):
            self.missing.append(name)
            return
        totals = self.totals

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                record = totals[name]
                record[0] += 1
                record[1] += time.monotonic() - started

        setattr(owner, attr, wrapper)

    def wrap_all(self, targets: Iterable[tuple[Any, str]]) -> None:
        for owner, attr in targets:
            self.wrap(owner, attr)

    def report(self) -> dict[str, dict[str, float]]:
        return {k: {"calls": int(v[0]), "seconds": round(v[1], 3)} for k, v in sorted(self.totals.items())}


def progress_summary(progress: Iterable[Any]) -> dict[str, Any]:
    """Sum a query's progress reports: batches, input rows and milliseconds per phase
    (latestOffset: finding new data; queryPlanning; addBatch: running the batch and its sink;
    walCommit / commitOffsets: the checkpoint's logs; triggerExecution: the whole trigger)."""
    batches = 0
    rows = 0
    duration: dict[str, int] = defaultdict(int)
    for p in progress:
        if isinstance(p, dict):
            n, d = p.get("numInputRows", 0), p.get("durationMs", {}) or {}
        else:
            n, d = p.numInputRows, dict(p.durationMs or {})
        batches += 1
        rows += int(n or 0)
        for key, value in d.items():
            duration[key] += int(value)
    return {"triggers": batches, "input_rows": rows, "duration_ms": dict(duration)}
