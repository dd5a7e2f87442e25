"""Where the managed engine keeps its state: ``$LAKEHOUSE_ROOT/_engine/``, or on this machine
for a lakehouse on object storage (:meth:`~lakehouse_assets.settings.LakehouseSettings.machine_path`).

The token file and the settings file (which holds the token too) are readable by their
owner only: the engine runs whatever code its clients send, so the token is the key to it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse_assets.settings import LakehouseSettings

OWNER_ONLY = 0o600
# Set in the server's environment; the JVM passes its environment on to every process it
# starts (PySpark's daemon and its forked workers included), so this finds them all.
ENGINE_MARKER = "LAKEHOUSE_ENGINE_DIR"


@dataclass(frozen=True)
class EngineFiles:
    """The managed engine's files under one lakehouse root."""

    folder: Path

    @classmethod
    def of(cls, settings: LakehouseSettings) -> EngineFiles:
        return cls(settings.engine_path())

    @property
    def marker(self) -> str:
        """``NAME=value`` in the environment of every process of this engine."""
        return f"{ENGINE_MARKER}={self.folder}"

    @property
    def token(self) -> Path:
        return self.folder / "token"

    @property
    def state(self) -> Path:
        """JSON: the server's pid, port and start time, written when it is launched
        (``ready`` false) and again once it answers (``ready`` true)."""
        return self.folder / "engine.json"

    @property
    def properties(self) -> Path:
        """The Spark settings the server starts with (``spark-submit --properties-file``)."""
        return self.folder / "spark-engine.conf"

    @property
    def log(self) -> Path:
        return self.folder / "engine.log"

    def read_token(self) -> str | None:
        try:
            return self.token.read_text().strip() or None
        except FileNotFoundError:
            return None

    def read_state(self) -> dict[str, Any] | None:
        try:
            state = json.loads(self.state.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def write_state(self, state: dict[str, Any]) -> None:
        write_private(self.state, json.dumps(state, indent=2) + "\n")


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a file only its owner can read, replacing it atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, OWNER_ONLY)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    os.chmod(temporary, OWNER_ONLY)  # an older file of that name may have had other bits
    os.replace(temporary, path)
