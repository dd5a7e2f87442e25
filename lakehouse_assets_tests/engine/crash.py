"""Killing a managed engine as a crash would, for fault-injection tests."""

from __future__ import annotations

import contextlib
import os
import signal

from lakehouse_assets.engine.files import EngineFiles
from lakehouse_assets.engine.processes import is_engine_process
from lakehouse_assets.settings import LakehouseSettings


def kill_engine(settings: LakehouseSettings) -> int | None:
    """SIGKILL the engine's server process and clean nothing up: its state and token stay,
    and its Python workers are left to notice on their own. Returns the pid killed, or None
    when no engine was running."""
    files = EngineFiles.of(settings)
    pid = (files.read_state() or {}).get("pid")
    if not isinstance(pid, int) or pid <= 0 or not is_engine_process(pid, files):
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return pid
