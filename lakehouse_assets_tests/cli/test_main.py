"""The top level of the command: help, exit codes, how the root is chosen, both entry points."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakehouse_assets_tests.cli.helpers import Runner, write_table

SUBCOMMANDS = ["land", "status", "history", "show", "reset"]


def test_top_level_help_lists_commands_and_documents_exit_codes(lakehouse: Runner) -> None:
    result = lakehouse("--help")
    assert result.code == 0, str(result)
    for name in SUBCOMMANDS:
        assert name in result.stdout
    assert "exit codes:" in result.stdout
    for code, meaning in [("0", "success"), ("1", "failure"), ("2", "usage error")]:
        assert re.search(rf"^\s+{code}\s+{meaning}", result.stdout, re.MULTILINE), str(result)
    assert "LAKEHOUSE_ROOT" in result.stdout


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_has_help(lakehouse: Runner, name: str) -> None:
    result = lakehouse(name, "--help")
    assert result.code == 0, str(result)
    assert result.stdout.startswith(f"usage: lakehouse {name}")
    assert "--root" in result.stdout
    assert result.stderr == ""


def test_python_dash_m_is_the_same_command(lakehouse_process: Runner) -> None:
    # Both real entry points, each in a process of its own: the console script and python -m.
    by_module = lakehouse_process("--help", via="module")
    assert by_module.code == 0, by_module
    assert by_module.stdout == lakehouse_process("--help", via="script").stdout


@pytest.mark.parametrize("args", [("status", "--json"), ("status",), ("history", "silver.patients", "--json"),
                                  ("history", "silver.patient"), ("show", "silver.patients", "--limit", "x")],
                         ids=" ".join)
def test_the_console_script_does_what_the_in_process_runs_do(
        lakehouse: Runner, lakehouse_process: Runner, root: Path, args: tuple[str, ...]) -> None:
    """The real command, end to end through the console script, against the runs in this
    process the other tests use: the same exit code, stdout and stderr, to the character."""
    write_table(root, "silver.patients", {"mrn": [1, 2], "name": ["a", "b"]})
    (root / "landing" / "recordings").mkdir(parents=True)

    by_script = lakehouse_process(*args)
    in_process = lakehouse(*args)

    assert (in_process.code, in_process.stdout, in_process.stderr) == \
        (by_script.code, by_script.stdout, by_script.stderr), f"{by_script}\n{in_process}"
    assert by_script.stdout or by_script.stderr


def test_no_subcommand_is_a_usage_error(lakehouse: Runner) -> None:
    result = lakehouse()
    assert result.code == 2, str(result)
    assert "usage: lakehouse" in result.stderr


@pytest.mark.parametrize("args", [["frobnicate"], ["status", "--no-such-option"],
                                  ["land", "--files", "0"], ["land", "--bad-rate", "1.5"],
                                  ["show", "bronze.recordings", "--limit", "x"],
                                  ["history"]])
def test_bad_command_lines_exit_2_without_traceback(lakehouse: Runner, args: list[str]) -> None:
    result = lakehouse(*args)
    assert result.code == 2, str(result)
    assert "Traceback" not in result.stderr
    assert "error:" in result.stderr


def test_root_option_overrides_the_environment(lakehouse: Runner, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "landing" / "recordings").mkdir(parents=True)
    before = lakehouse("--root", str(other), "status", "--json")
    after = lakehouse("status", "--json", "--root", str(other))
    assert before.code == after.code == 0, f"{before}\n{after}"
    assert f'"root": "{other}"' in before.stdout
    assert before.stdout == after.stdout


def test_root_defaults_to_lakehouse_data_in_the_working_directory(lakehouse: Runner, tmp_path: Path) -> None:
    result = lakehouse("status", cwd=tmp_path, root_env=None)
    assert result.code == 1, str(result)
    assert f"No lakehouse at {tmp_path / 'lakehouse_data'}" in result.stderr
    assert "LAKEHOUSE_ROOT" in result.stderr and "--root" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_setting_in_the_environment_is_one_clear_error(lakehouse: Runner) -> None:
    result = lakehouse("status", extra_env={"LAKEHOUSE_SPARK_CONF": "{not json"})
    assert result.code == 1, str(result)
    assert "LAKEHOUSE_SPARK_CONF is not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
