"""TABLE validation: names never steer paths outside the root, or into its machinery."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from lakehouse_assets.cli.arguments import TableName, table_name
from lakehouse_assets_tests.cli.helpers import Runner

VALID = [
    ("silver.recordings_enriched", TableName("silver", "recordings_enriched")),
    ("gold.daily_patient_avg", TableName("gold", "daily_patient_avg")),
    ("Bronze.T2", TableName("Bronze", "T2")),
]

INVALID = [
    ("../etc", "dots"),
    ("bronze", "no table name"),
    ("a.b.c", "dots"),
    ("bronze.", "table name ''"),
    (".recordings", "layer ''"),
    ("bronze/../..", "dots"),
    ("bronze./etc", "table name '/etc'"),
    ("bronze.re cordings", "table name"),
    ("_checkpoints.bronze", "layer '_checkpoints'"),
    ("bronze._delta_log", "table name '_delta_log'"),
    ("landing.recordings", "landed files"),
    ("bronze.récordings", "table name"),
    ("1bronze.recordings", "layer '1bronze'"),
    ("", "no table name"),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid_names(text: str, expected: TableName) -> None:
    assert table_name(text) == expected
    assert str(table_name(text)) == text


@pytest.mark.parametrize(("text", "why"), INVALID)
def test_invalid_names_say_why_and_give_an_example(text: str, why: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        table_name(text)
    assert why in str(raised.value)
    assert f"invalid TABLE {text!r}" in str(raised.value)


def test_a_very_long_part_is_refused() -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        table_name("bronze." + "a" * 129)
    assert table_name("bronze." + "a" * 128).name == "a" * 128


@pytest.mark.parametrize("command", ["history", "show", "reset"])
@pytest.mark.parametrize("text", ["../etc", "bronze", "a.b.c"])
def test_every_table_command_refuses_bad_names_as_usage_errors(
        lakehouse: Runner, root: Path, command: str, text: str) -> None:
    outside = root.parent / "etc"  # what "../etc" would reach from the root
    outside.mkdir()
    (outside / "keep").write_text("x")
    result = lakehouse(command, text, "--yes") if command == "reset" else lakehouse(command, text)
    assert result.code == 2, str(result)
    assert f"invalid TABLE {text!r}" in result.stderr
    assert "Traceback" not in result.stderr
    assert (outside / "keep").read_text() == "x"
