"""Which landed files are data, and finding them.

Writers land a file under a temporary name and rename it when it is complete, so names starting
with ``_`` or ``.`` and ending in ``.tmp`` or ``.partial`` are never data. Spark's file source is
told the same rule as a glob (:func:`data_file_glob`): such files are never opened or remembered.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import re
from dataclasses import dataclass, field

from lakehouse_assets.location import Location, local_path, locate
from lakehouse_assets.storage.batch_record import landed_file_line

IGNORED_PREFIXES = ("_", ".")
IGNORED_SUFFIXES = (".tmp", ".partial")


def is_data_file(name: str) -> bool:
    """Whether a file called ``name`` (no folder) holds data rather than being in progress
    or hidden."""
    return bool(name) and not name.startswith(IGNORED_PREFIXES) and not name.endswith(IGNORED_SUFFIXES)


def ignored_name_regex() -> str:
    """A regular expression (Java's and Python's) matching the names that are not data."""
    prefixes = "".join(re.escape(p) for p in IGNORED_PREFIXES)
    suffixes = "|".join(re.escape(s) for s in IGNORED_SUFFIXES)
    return rf"^[{prefixes}]|({suffixes})$"


def data_file_glob() -> str:
    """A Hadoop glob (as ``pathGlobFilter`` takes it) matching exactly the names
    :func:`is_data_file` accepts.

    Globs cannot say "does not end with": a name is data when, for every ignored suffix, one of
    its last characters differs from it. That conjunction of disjunctions, expanded, is an
    alternation of patterns with ``[^c]`` classes: by length up to the longest suffix, then
    ``[^_.]*`` and the last characters.
    """
    width = max(len(s) for s in IGNORED_SUFFIXES)
    patterns: list[str] = []
    for length in range(1, width + 2):
        open_ended = length == width + 1
        window = width if open_ended else length
        # Each clause is a list of alternatives (position, forbidden character); a name is
        # data when every clause holds, i.e. when one alternative of each clause holds.
        clauses = []
        for suffix in IGNORED_SUFFIXES:
            if len(suffix) > (window if open_ended else length):
                continue
            start = window - len(suffix)
            clauses.append([(start + i, ch) for i, ch in enumerate(suffix)])
        terms: list[tuple[frozenset[str], ...]] = []
        for choice in itertools.product(*clauses):
            forbidden: dict[int, set[str]] = {}
            for position, ch in choice:
                forbidden.setdefault(position, set()).add(ch)
            if not open_ended:
                forbidden.setdefault(0, set()).update(IGNORED_PREFIXES)
            terms.append(tuple(frozenset(forbidden.get(p, ())) for p in range(window)))
        # A term that forbids more than another of the same length matches fewer names: drop it.
        kept = [
            t for t in dict.fromkeys(terms)
            if not any(o != t and all(a <= b for a, b in zip(o, t, strict=True)) for o in terms)
        ]
        for term in kept:
            body = "".join(_glob_class(chars) for chars in term)
            patterns.append(f"[^{''.join(IGNORED_PREFIXES)}]*{body}" if open_ended else body)
    return "{" + ",".join(patterns) + "}"


def _glob_class(forbidden: frozenset[str]) -> str:
    return "?" if not forbidden else "[^" + "".join(sorted(forbidden)) + "]"


def glob_matches(text: str, pattern: str) -> bool:
    """Whether ``text`` matches a Hadoop-style glob (``*``, ``?``, ``[abc]``, ``[^a]``,
    ``{a,b}``, nested too), case-sensitively."""
    regex, depth = "", 0
    for token in re.findall(r"\[\^?\]?[^\]]*\]|.", pattern, re.DOTALL):
        if token == "{" or (token in ",}" and depth):
            depth += {"{": 1, ",": 0, "}": -1}[token]
            regex += {"{": "(?:", ",": "|", "}": ")"}[token]
        elif len(token) > 1:
            regex += token  # a character class, negated with ^ as in Java's regexes
        else:
            regex += {"*": ".*", "?": "."}.get(token) or re.escape(token)
    return re.fullmatch(regex, text, re.DOTALL) is not None


# -- paths ---------------------------------------------------------------------------------------
def local_file_path(path: str) -> str:
    """A landed file as the lakehouse compares it: a local file's path or ``file:`` URI (as
    ``_source_file`` records it: Spark spells ``file:///a/b%20c.json``) as a plain, normalised
    path (``/a/b c.json``); a file on object storage as its ``s3a://`` URI."""
    plain = local_path(path)
    return plain if "://" in plain else os.path.normpath(plain)


@dataclass(frozen=True)
class LandedFile:
    """A file in a landing folder."""

    path: str  # as Spark names it: file:/... for local files
    relative_path: str
    size: int
    modification_time: dt.datetime
    location: Location = field(compare=False, repr=False)  # reached through its folder's store


def path_matches(relative_path: str, pattern: str) -> bool:
    """Whether the file at ``relative_path`` (``a/b/c.json``) is among those a path pattern
    names, as Spark's file source reads ``folder/pattern``: the pattern's parts (Hadoop globs,
    ``batch_*/orders.csv``) match the file's path or one of its folders, part by part."""
    wanted, parts = pattern.strip("/").split("/"), relative_path.split("/")
    return len(parts) >= len(wanted) and all(glob_matches(p, w) for p, w in zip(parts, wanted, strict=False))


def list_data_files(
    folder: str | os.PathLike[str], *, recursive: bool = False, path_glob_filter: str | None = None,
    path_pattern: str | None = None,
) -> list[LandedFile]:
    """The data files in ``folder``, oldest first (then by name). Hidden and in-progress names
    are skipped, and so are folders whose names start with ``_`` or ``.``. A folder that does
    not exist holds no files. With ``path_pattern`` only the files it names
    (:func:`path_matches`), at any depth. ``folder`` is a :class:`Location` (one on object
    storage is reached through its store) or a local path."""
    recursive = recursive or path_pattern is not None
    location = locate(folder)
    found = []
    for stored in location.files(recursive=recursive):
        parts = stored.relative_path.split("/")
        if any(p.startswith(IGNORED_PREFIXES) for p in parts[:-1]) or not is_data_file(parts[-1]):
            continue
        if path_glob_filter and not glob_matches(parts[-1], path_glob_filter):
            continue
        if path_pattern is not None and not path_matches(stored.relative_path, path_pattern):
            continue
        uri = (location.uri_of(stored.relative_path) if location.is_local
               else f"{location.uri}/{stored.relative_path}")
        found.append(LandedFile(path=uri, relative_path=stored.relative_path, size=stored.size,
                                modification_time=stored.modified, location=location / stored.relative_path))
    found.sort(key=lambda f: (f.modification_time, f.relative_path))
    return found


def landed_paths(folder: Location, pattern: str | None = None) -> list[str]:
    """The data files under the landing folder ``folder``, nested folders included (only those
    ``pattern`` names, if given), in name order, each as :func:`local_file_path` gives it: what
    ingestion reads from it."""
    listed = list_data_files(folder, recursive=True, path_pattern=pattern)
    return sorted(local_file_path(f.path) for f in listed)


def landed_listing(folder: Location) -> tuple[str, ...]:
    """What a landing folder holds, one line per data file (its path below the folder, size and
    modification time): what a table loading it in batch records having read
    (:class:`~lakehouse_assets.storage.batch_record.Reading`)."""
    return tuple(landed_file_line(f.relative_path, f.size, f.modification_time.isoformat())
                 for f in sorted(list_data_files(folder, recursive=True), key=lambda f: f.relative_path))
