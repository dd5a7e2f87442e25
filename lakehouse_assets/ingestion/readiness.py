"""Which unread landed files a run may read now, and which it holds back, and why.

Spark's file source remembers every file it assigns to a micro-batch and never reads that
path again. So a file it should not read yet must not be assigned at all:

- an **empty** (zero-byte) file: it has no records, and if a writer is still filling it, its
  content would be lost once the empty file is taken. It is read once it has content;
- a file that **cannot be opened** (permissions, a dangling or unreadable link): reading it
  would fail the micro-batch, and every replay of it, so the good files with it would be
  stuck too. It is read on the first run after it can be opened;
- a file whose **name Spark cannot read by**: ``:`` makes Hadoop's paths fail, and ``?``,
  ``*``, ``[``, ``]``, ``{``, ``}`` and ``\\`` make Spark's file source read *other* files
  of the batch twice. It is read once renamed.

Held-back files are listed, each with its reason and what to do, so nothing is skipped
without a word. Files already assigned to a micro-batch that did not finish are replayed by
Spark as they are: they are not held back.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass

from lakehouse_assets.ingestion.files import LandedFile
from lakehouse_assets.location import Location

# Characters a landed file name must not hold for Spark's file source to read it correctly.
UNREADABLE_NAME_CHARACTERS = frozenset(":?*[]{}\\")
# A glob no listed name matches: the file system never lists "..".
_MATCHES_NOTHING = ".."
# Characters that stand for themselves in a Hadoop glob; any other ASCII character is escaped.
_LITERAL = frozenset(string.ascii_letters + string.digits + "_-")


@dataclass(frozen=True)
class HeldBack:
    """A landed file a run does not read yet: why, and what to do about it."""

    file: LandedFile
    reason: str

    def message(self) -> str:
        return f"{self.file.path}: {self.reason}"


def hold_back(files: Sequence[LandedFile]) -> list[HeldBack]:
    """The files of ``files`` that must not be read now (see the module's rules)."""
    held = []
    for landed in files:
        reason = _reason(landed)
        if reason is not None:
            held.append(HeldBack(landed, reason))
    return held


def _reason(landed: LandedFile) -> str | None:
    name = landed.relative_path.rsplit("/", 1)[-1]
    odd = sorted(set(name) & UNREADABLE_NAME_CHARACTERS)
    if odd:
        return (
            f"its name holds {' '.join(repr(c) for c in odd)}, which Spark's file source cannot read "
            "a file by (it would fail, or read other files twice). Rename it without them; it is "
            "read on the next run."
        )
    if landed.size == 0:
        return (
            "it is empty (0 bytes), so it is not read yet: a file still being written would lose "
            "its content once read empty. It is read on the first run after it has content; "
            "delete it if it stays empty."
        )
    problem = _open_problem(landed.location)
    if problem is not None:
        return (
            f"it cannot be opened ({problem}). Fix its permissions (or replace the link with the "
            "file); it is read on the first run after it can be opened."
        )
    return None


def _open_problem(file: Location) -> str | None:
    try:
        if file.is_local:
            # Opening is the test: the owner, mode and ACLs all decide, and root reads anything.
            with open(file.path, "rb") as handle:
                handle.read(1)
        else:
            with file.fs.open_input_stream(file.path) as stream:
                stream.read(1)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def glob_of_names(names: Sequence[str]) -> str:
    """A Hadoop glob (as ``pathGlobFilter`` takes it) matching exactly these file names."""
    if not names:
        return _MATCHES_NOTHING
    escaped = sorted({"".join(_escape(c) for c in name) for name in names})
    return "{" + ",".join(escaped) + "}"


def _escape(ch: str) -> str:
    # A backslash makes the next character literal in Hadoop's glob (and in the Java regex it
    # becomes); non-ASCII characters are literal already, and "\é" would be an invalid regex.
    if ch in _LITERAL or ord(ch) > 127:
        return ch
    return "\\" + ch

