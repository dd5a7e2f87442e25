"""The lakehouse tables a SQL text names, found without a SQL parser.

Spark's catalog cannot hold a Delta table without delta-spark, so ``FROM bronze.recordings``
means nothing to Spark itself. The lakehouse reads each named table through its storage
layer, registers it as a temporary view, and runs the query with the name replaced by the
view's (:mod:`.lakehouse_tables`). This module only finds the names, and says what to put
in their place:

- ``layer.table`` (either part may be back-quoted) when it names a table the lakehouse has;
  any other two-part name is left to Spark (a column such as ``r.mrn``, a view);
- ``STREAM(layer.table)`` or ``STREAM layer.table``: the table read as a stream (Lakeflow's
  spelling) - only in an incremental query;
- ``layer.table VERSION AS OF 3`` / ``TIMESTAMP AS OF '2026-01-01'``: time travel.

Strings, comments and back-quoted identifiers are skipped as wholes, so a name inside them
is never touched. A replaced table keeps its own name as its alias (``recordings.mrn`` still
resolves) unless the query gives it one.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>--[^\n]*|/\*.*?\*/)
    | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<quoted>`(?:[^`]|``)*`)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<number>\d+(?:\.\d+)?)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)

# Words that may follow a relation and are not its alias.
_NOT_AN_ALIAS = frozenset("""
    where join inner left right full cross outer natural semi anti on using group order limit
    offset union except minus intersect having window lateral cluster distribute sort tablesample
    pivot unpivot version timestamp for qualify as with select from
""".split())


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int

    @property
    def name(self) -> str | None:
        """The identifier this token spells (back-quotes removed), if it is one."""
        if self.kind == "word":
            return self.text
        if self.kind == "quoted":
            return self.text[1:-1].replace("``", "`")
        return None


@dataclass(frozen=True)
class TableRef:
    """One reference to a lakehouse table in a SQL text: ``text[start:end]`` names ``table``
    (``layer.name``), read as a stream or as it stood at ``version`` / ``timestamp``."""

    table: str
    start: int
    end: int
    stream: bool = False
    version: int | None = None
    timestamp: str | None = None
    #: Whether the query gives the relation an alias of its own.
    aliased: bool = False


def tokens(sql: str) -> list[Token]:
    """The significant tokens of ``sql``: no spaces, no comments."""
    found = []
    for match in _TOKEN.finditer(sql):
        kind = match.lastgroup or "other"
        if kind not in ("space", "comment"):
            found.append(Token(kind, match.group(), match.start(), match.end()))
    return found


def find_table_refs(sql: str, known_tables: Collection[str]) -> list[TableRef]:
    """Every reference in ``sql`` to one of ``known_tables`` (``layer.name``, compared
    without regard to case), in order."""
    known = {t.lower(): t for t in known_tables}
    toks = tokens(sql)
    refs = []
    i = 0
    while i < len(toks):
        ref, i = _ref_at(sql, toks, i, known)
        if ref is not None:
            refs.append(ref)
    return refs


def referenced_tables(sql: str, layers: Collection[str]) -> list[tuple[str, bool]]:
    """The two-part names in ``layers`` that ``sql`` reads from (right after FROM, JOIN or
    STREAM), each once, with whether it is read as a stream: what a query depends on, found
    before any table exists."""
    wanted = {layer.lower() for layer in layers}
    toks = tokens(sql)
    found: dict[str, bool] = {}
    for i in range(len(toks)):
        if not _is_word(toks, i, "from", "join", "stream"):
            continue
        at = i + 2 if _is(toks, i + 1, "(") else i + 1
        name = _two_part_name(toks, at)
        if name is not None and name.split(".", 1)[0].lower() in wanted:
            stream = _is_word(toks, i, "stream")
            found[name] = found.get(name, False) or stream
    return list(found.items())


def unknown_tables(sql: str, known_tables: Collection[str], layers: Collection[str] = ()) -> list[str]:
    """The two-part names ``sql`` reads from (right after FROM, JOIN or STREAM) in one of the
    lakehouse's layers (those of ``known_tables``, and ``layers``) that are not among
    ``known_tables``: a typo, or a table never written."""
    all_layers = {t.split(".", 1)[0] for t in known_tables} | set(layers)
    known = {t.lower() for t in known_tables}
    return [name for name, _ in referenced_tables(sql, all_layers) if name.lower() not in known]


def rewrite(sql: str, refs: Sequence[TableRef], view_names: Sequence[str]) -> str:
    """``sql`` with each reference replaced by its view (``view_names[i]`` for ``refs[i]``),
    aliased with the table's own name where the query gives none."""
    parts, last = [], 0
    for ref, view in zip(refs, view_names, strict=True):
        alias = "" if ref.aliased else f" AS `{ref.table.split('.', 1)[1]}`"
        parts += [sql[last:ref.start], f"`{view}`{alias}"]
        last = ref.end
    parts.append(sql[last:])
    return "".join(parts)


def _ref_at(sql: str, toks: list[Token], i: int, known: dict[str, str]) -> tuple[TableRef | None, int]:
    """The reference starting at token ``i`` if there is one, and where to look next."""
    stream = _is_word(toks, i, "stream")
    parenthesised = stream and _is(toks, i + 1, "(")
    name_at = i + (2 if parenthesised else 1 if stream else 0)
    table = _two_part_name(toks, name_at)
    if table is None or table.lower() not in known or (name_at > 0 and _is(toks, name_at - 1, ".")):
        return None, i + 1
    end_at = name_at + 3
    if parenthesised:
        if not _is(toks, end_at, ")"):
            return None, i + 1
        end_at += 1
    version = timestamp = None
    if _is_word(toks, end_at, "version", "timestamp") and _is_word(toks, end_at + 1, "as") and \
            _is_word(toks, end_at + 2, "of") and end_at + 3 < len(toks):
        value = toks[end_at + 3]
        if value.kind == "number" and toks[end_at].text.lower() == "version":
            version = int(value.text)
        elif value.kind == "string":
            timestamp = value.text[1:-1]
        else:
            return None, i + 1
        end_at += 4
    following = toks[end_at] if end_at < len(toks) else None
    aliased = _is_word(toks, end_at, "as") or (
        following is not None and following.kind in ("word", "quoted") and following.text.lower() not in _NOT_AN_ALIAS
    )
    ref = TableRef(
        table=known[table.lower()], start=toks[i].start, end=toks[end_at - 1].end, stream=stream,
        version=version, timestamp=timestamp, aliased=aliased,
    )
    return ref, end_at


def _two_part_name(toks: list[Token], i: int) -> str | None:
    if i + 2 >= len(toks) or not _is(toks, i + 1, "."):
        return None
    layer, name = toks[i].name, toks[i + 2].name
    if layer is None or name is None or _is(toks, i + 3, "."):
        return None  # not a name, or a longer one (catalog.layer.table, table.column.field)
    return f"{layer}.{name}"


def _is(toks: list[Token], i: int, text: str) -> bool:
    return 0 <= i < len(toks) and toks[i].kind == "other" and toks[i].text == text


def _is_word(toks: list[Token], i: int, *words: str) -> bool:
    return 0 <= i < len(toks) and toks[i].kind == "word" and toks[i].text.lower() in words
