"""The tables a SQL text reads, found without running it or a SQL parser: what a SQL
asset depends on is known when the definitions load, before any table exists.

- ``layer.table`` (either part may be back-quoted) right after FROM or JOIN;
- ``STREAM(layer.table)`` or ``STREAM layer.table``: the table read as a stream.

Strings, comments and back-quoted identifiers are tokens of their own, so a name inside
them is never taken for a reference. Running the query is Spark's: the tables are in its
catalog (:mod:`.catalog`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
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


def tokens(sql: str) -> list[Token]:
    """The significant tokens of ``sql``: no spaces, no comments."""
    found = []
    for match in _TOKEN.finditer(sql):
        kind = match.lastgroup or "other"
        if kind not in ("space", "comment"):
            found.append(Token(kind, match.group(), match.start(), match.end()))
    return found


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


@dataclass(frozen=True)
class StreamReference:
    """``STREAM(layer.table)`` or ``STREAM layer.table`` after FROM or JOIN: where it is in
    the text (``start`` to ``end``), the table (``layer.name``) and its name as written."""

    start: int
    end: int
    table: str
    written: str


def stream_references(sql: str) -> list[StreamReference]:
    """Every table ``sql`` reads as a stream, where it reads it, in the order written."""
    toks = tokens(sql)
    found = []
    for i in range(1, len(toks)):
        if not (_is_word(toks, i, "stream") and _is_word(toks, i - 1, "from", "join")):
            continue
        parenthesised = _is(toks, i + 1, "(")
        at = i + 2 if parenthesised else i + 1
        name = _two_part_name(toks, at)
        last = at + 3 if parenthesised else at + 2
        if name is None or (parenthesised and not _is(toks, last, ")")):
            continue
        found.append(StreamReference(toks[i].start, toks[last].end, name, sql[toks[at].start:toks[at + 2].end]))
    return found


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


def batch_query(sql: str) -> str:
    """``sql`` reading every table it streams as the table stands (``STREAM(x)`` as ``x``): the
    query a streaming table's rows are recomputed with in batch."""
    for ref in reversed(stream_references(sql)):
        sql = sql[:ref.start] + ref.written + sql[ref.end:]
    return sql
