"""Which unread landed files a run may read now, and which it holds back, and why.

Spark's file source never reads a path it assigned to a micro-batch again, so a file it should
not read yet must not be assigned at all: an empty file (a writer may still be filling it), a
file that cannot be opened (it would fail its batch, and every replay of it), or a name Spark
cannot read by. Each held-back file is named with its reason and what to do (:func:`_reason`).
Files of a micro-batch that did not finish are replayed by Spark as they are.
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
    return [HeldBack(landed, reason) for landed in files if (reason := _reason(landed)) is not None]


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

