"""Safe defaults of the command line (issue 8): ``lakehouse land`` writes only under the
lakehouse root, whatever its options or the landing folder's manifest say, and TABLE names
that could reach outside the root, or carry shell syntax, are usage errors (exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakehouse_assets_tests.cli.helpers import Runner


def files_outside(root: Path) -> set[Path]:
    """Every file beside the root (in the test's temporary folder), the root excluded."""
    return {p for p in root.parent.rglob("*") if p.is_file() and root not in p.parents}


@pytest.mark.parametrize("option", [["--source", "../x"], ["--landing", "/tmp/x"], ["--name", "../../escaped.json"]])
def test_land_has_no_option_naming_where_to_write(lakehouse: Runner, root: Path, option: list[str]) -> None:
    """Where files land follows from the root alone: an option naming a folder or file is
    refused before anything is written."""
    before = files_outside(root)

    result = lakehouse("land", *option)

    assert result.code == 2, str(result)
    assert "unrecognized arguments" in result.stderr and "Traceback" not in result.stderr
    assert not any(root.rglob("*")) and files_outside(root) == before


def test_land_names_files_by_number_not_by_what_the_manifest_says(lakehouse: Runner, root: Path) -> None:
    """A manifest edited to name files outside the landing folder steers nothing: file names
    come from the file numbers."""
    assert lakehouse("land", "--files", "1", "--records", "10").code == 0
    manifest = root / "landing" / "recordings" / "_manifest.json"
    document = json.loads(manifest.read_text())
    for entry in document["files"]:
        entry["name"] = "../../../escaped.json"
    manifest.write_text(json.dumps(document))
    before = files_outside(root)

    result = lakehouse("land", "--files", "1", "--records", "10")

    assert result.code == 0, str(result)
    assert files_outside(root) == before
    landed = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.json") if not p.name.startswith("_"))
    assert landed == ["landing/recordings/recordings-000001.json", "landing/recordings/recordings-000002.json"]


@pytest.mark.parametrize("command", ["history", "show", "reset", "vacuum", "trace"])
@pytest.mark.parametrize("text", ["../../etc", "silver.x;rm", "silver.x/../../y", "silver.$(id)"])
def test_table_names_that_escape_the_root_or_hold_shell_syntax_are_usage_errors(
    lakehouse: Runner, root: Path, command: str, text: str
) -> None:
    args = [command, text, "--yes"] if command == "reset" else [command, text]

    result = lakehouse(*args)

    assert result.code == 2, str(result)
    assert f"invalid TABLE {text!r}" in result.stderr
    assert "layer.name" in result.stderr or "must start with a letter" in result.stderr  # says what is valid
    assert "Traceback" not in result.stderr
    assert not any(root.rglob("*"))
