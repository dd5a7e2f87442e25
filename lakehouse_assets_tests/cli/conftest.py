"""Fixtures of the CLI tests: a temporary lakehouse root, the ``lakehouse`` command run in
this process against it, and the real command run in a subprocess for the tests of the entry
points themselves (and of what only a process of its own shows)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import pytest

from lakehouse_assets_tests.cli.helpers import TIMEOUT_SECONDS, Result, Runner, cli_env, command
from lakehouse_assets_tests.cli.in_process import run_in_process


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty lakehouse root."""
    folder = tmp_path / "lakehouse"
    folder.mkdir()
    return folder


@pytest.fixture
def lakehouse(root: Path, request: pytest.FixtureRequest) -> Runner:
    """``lakehouse(*args, stdin_text=..., cwd=..., root_env=..., extra_env=...)``: run the
    command in this process (``lakehouse_assets.cli.main``), with LAKEHOUSE_ROOT set to
    ``root_env`` (the test's root by default; None unsets it), ``extra_env`` added, and a stdin
    that is not a terminal (or ``stdin=``, e.g. a pseudo-terminal); its stdout, stderr and exit
    code as a subprocess would give them (see :mod:`.in_process`). Commands that start Spark
    need the test to request ``spark``, whose SparkSession they then use."""

    def run(*args: str, stdin_text: str = "", stdin: TextIO | None = None, cwd: Path | None = None,
            root_env: Path | None = root, extra_env: Mapping[str, str] | None = None) -> Result:
        return run_in_process(args, stdin_text=stdin_text, stdin=stdin, cwd=cwd, root_env=root_env,
                              extra_env=extra_env, spark_requested="spark" in request.fixturenames)

    return run


@pytest.fixture
def lakehouse_process(root: Path) -> Runner:
    """``lakehouse_process(*args, via=..., stdin_text=..., cwd=..., root_env=..., extra_env=...)``:
    run the installed command in a subprocess (``via="script"``: the console script,
    ``"module"``: ``python -m``), otherwise as ``lakehouse`` does. Seconds per call (and a JVM
    start for the commands that need Spark): only for what only a real process proves."""

    def run(*args: str, via: str = "script", stdin_text: str = "", cwd: Path | None = None,
            root_env: Path | None = root, extra_env: Mapping[str, str] | None = None) -> Result:
        completed = subprocess.run(
            [*command(via), *args], input=stdin_text, capture_output=True, text=True, cwd=cwd,
            timeout=TIMEOUT_SECONDS, env=cli_env(root_env, extra_env))
        return Result(tuple(args), completed.returncode, completed.stdout, completed.stderr)

    return run
