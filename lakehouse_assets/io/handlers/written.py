"""What a handler hands back to the IO manager: the version it committed last, and the
metadata its kind of output reports (the table's own metadata is added around it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lakehouse_assets.streaming import StreamRun


@dataclass(frozen=True)
class Written:
    """What one output's handler did: ``version`` is the last version it committed (None:
    nothing new), ``metadata`` what it reports beyond the table's own, and for a streaming
    output, its ``query``'s run (progress per batch, commits)."""

    version: int | None
    metadata: dict[str, Any] = field(default_factory=dict)
    query: StreamRun | None = None
