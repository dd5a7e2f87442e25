"""Fixtures for the simulator tests: nothing here starts Spark."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    """An empty landing folder (the lander creates its subfolders)."""
    return tmp_path / "landing"
