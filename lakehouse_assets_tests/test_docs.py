"""The README and docs/ say what the code does: the README's commands run as written on the
reference lakehouse, and every command, module, setting and link the pages name exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from lakehouse_assets.cli import build_parser
from lakehouse_assets_tests.built import BuiltLakehouse
from lakehouse_assets_tests.cli.in_process import run_in_process

REPOSITORY = Path(__file__).resolve().parents[1]
README = REPOSITORY / "README.md"
PAGES = [README, *sorted((REPOSITORY / "docs").rglob("*.md"))]
_BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
_FENCED = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)
# `lakehouse COMMAND` in code: a backtick span, or a line of a fenced block.
_COMMAND = re.compile(r"(?:`|^\s*)(?:\$ )?(?:\.venv/bin/)?lakehouse ([a-z][a-z-]+)", re.MULTILINE)
_MODULE = re.compile(r"\b((?:lakehouse_assets|lakehouse_assets_tests|benchmarks|scripts)/[\w/]+\.(?:py|sh))\b")
_SETTING = re.compile(r"\bLAKEHOUSE_[A-Z_]+\b")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _code(text: str) -> str:
    """What a page holds as code: its fenced blocks' lines, and its backtick spans."""
    return "\n".join([*_FENCED.findall(text), *re.findall(r"`[^`\n]+`", _FENCED.sub("", text))])


def readme_commands() -> list[list[str]]:
    """The ``lakehouse`` command lines of the README's shell blocks, as argv."""
    lines = [line.strip() for block in _BASH_BLOCK.findall(README.read_text()) for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith(".venv/bin/lakehouse ")]


@pytest.mark.slow
def test_the_readmes_commands_run_as_written_on_the_reference_lakehouse(spark, built: BuiltLakehouse) -> None:
    commands = readme_commands()
    assert [argv[0] for argv in commands] == ["status", "sql", "sql", "verify"]
    for argv in commands:
        result = run_in_process(argv, root_env=built.root, spark_requested=True)
        assert result.code == 0, f"lakehouse {shlex.join(argv)}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
        if argv[0] == "sql":
            assert "(5 rows)" in result.stdout, result.stdout


def test_every_lakehouse_command_the_pages_name_exists() -> None:
    subcommands = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    named = {(page.name, word) for page in PAGES for word in _COMMAND.findall(_code(page.read_text()))}
    unknown = sorted((page, word) for page, word in named if word not in subcommands)
    assert not unknown, f"pages name lakehouse commands that do not exist: {unknown}"


def test_every_module_the_pages_name_exists() -> None:
    named = {(page.name, path) for page in PAGES for path in _MODULE.findall(page.read_text())}
    missing = sorted((page, path) for page, path in named if not (REPOSITORY / path).exists())
    assert not missing, f"pages name files that do not exist: {missing}"


def test_every_setting_the_pages_name_is_read_by_the_code() -> None:
    code = "\n".join(path.read_text() for path in [*(REPOSITORY / "lakehouse_assets").rglob("*.py"),
                                                   *(REPOSITORY / "scripts").glob("*"), REPOSITORY / "Makefile"]
                     if path.is_file())
    named = {(page.name, name) for page in PAGES for name in _SETTING.findall(page.read_text())}
    unread = sorted((page, name) for page, name in named if name not in code)
    assert not unread, f"pages name settings nothing reads: {unread}"


def test_every_relative_link_resolves() -> None:
    broken = sorted((str(page.relative_to(REPOSITORY)), target) for page in PAGES
                    for target in _LINK.findall(page.read_text())
                    if "://" not in target and not (page.parent / target).exists())
    assert not broken, f"links to nothing: {broken}"
