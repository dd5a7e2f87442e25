"""Fixtures of the CLI tests: a temporary lakehouse root and the real ``lakehouse`` command
run in a subprocess against it."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from lakehouse_assets_tests.cli.helpers import TIMEOUT_SECONDS, Result, Runner, cli_env, command


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty lakehouse root."""
    folder = tmp_path / "lakehouse"
    folder.mkdir()
    return folder


@pytest.fixture
def lakehouse(root: Path) -> Runner:
    """``lakehouse(*args, via=..., stdin_text=..., cwd=..., root_env=..., extra_env=...)``:
    run the command (``via="script"``: the console script, ``"module"``: ``python -m``) with
    LAKEHOUSE_ROOT set to ``root_env`` (the test's root by default; None unsets it) and a
    stdin that is not a terminal."""

    def run(*args: str, via: str = "script", stdin_text: str = "", cwd: Path | None = None,
            root_env: Path | None = root, extra_env: Mapping[str, str] | None = None) -> Result:
        completed = subprocess.run(
            [*command(via), *args], input=stdin_text, capture_output=True, text=True, cwd=cwd,
            timeout=TIMEOUT_SECONDS, env=cli_env(root_env, extra_env))
        return Result(tuple(args), completed.returncode, completed.stdout, completed.stderr)

    return run
