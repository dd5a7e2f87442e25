"""The tables and files a SQL query reads, found without running it: what a SQL dataset
depends on is known when the definitions load, before any table exists. sqlglot reads the
query in Databricks' dialect, which knows ``STREAM``; :func:`tokens` (strings, comments and
back-quoted names each one token) gives the spans a run replaces, and reads the statements
around a query (``CREATE ... AS``), which sqlglot does not know.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

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
#: Table-valued functions reading files: ``read_files(...)``, and Lakeflow's older ``cloud_files(...)``.
FILE_READERS = ("read_files", "cloud_files")


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


def statements(toks: list[Token]) -> list[list[Token]]:
    """``toks`` split at the semicolons (those in strings are inside their tokens)."""
    found: list[list[Token]] = [[]]
    for tok in toks:
        if tok.kind == "other" and tok.text == ";":
            found.append([])
        else:
            found[-1].append(tok)
    return [statement for statement in found if statement]


def unquoted(tok: Token) -> str:
    """A string or back-quoted token's text, unquoted (Spark's escapes: \\' is ')."""
    if tok.kind == "string":
        return re.sub(r"\\(.)", r"\1", tok.text[1:-1])
    return tok.name or tok.text


def depths(toks: list[Token]) -> list[int]:
    """How many parentheses enclose each token (a parenthesis itself sits outside its pair)."""
    found, depth = [], 0
    for tok in toks:
        if tok.text == ")":
            depth -= 1
        found.append(depth)
        if tok.text == "(":
            depth += 1
    return found


def closing_parenthesis(toks: list[Token], at: int) -> int | None:
    """The index of the parenthesis closing the one at ``at``."""
    nested = depths(toks)
    return next((i for i in range(at + 1, len(toks)) if toks[i].text == ")" and nested[i] == nested[at]), None)


def split_commas(toks: list[Token]) -> list[list[Token]]:
    """``toks`` split at the commas outside parentheses."""
    items: list[list[Token]] = [[]]
    for tok, depth in zip(toks, depths(toks), strict=True):
        if tok.text == "," and depth == 0:
            items.append([])
        else:
            items[-1].append(tok)
    return [item for item in items if item]


@dataclass(frozen=True)
class Reference:
    """A table or files a query reads: its span (``STREAM(...)`` included), what it reads as
    written, whether as a stream, and the table (back-quotes removed) or the file reader's call."""

    start: int
    end: int
    written: str
    streamed: bool
    table: str | None = None
    files: exp.Anonymous | None = None


def references(sql: str) -> list[Reference]:
    """Every table and file reader the query ``sql`` reads from, in the order written (a WITH's
    own names left out). Raises sqlglot's error for a query it cannot read."""
    tree = sqlglot.parse_one(sql, dialect="databricks")
    ctes = {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    toks = tokens(sql)
    first_at = {tok.start: i for i, tok in enumerate(toks)}
    last_at = {tok.end - 1: i for i, tok in enumerate(toks)}
    found = []
    for table in tree.find_all(exp.Table):
        files = table.this if isinstance(table.this, exp.Anonymous) else None
        if (files is None and not isinstance(table.this, exp.Identifier)) or \
                (files is not None and files.name.lower() not in FILE_READERS):
            continue  # another table-valued function (range(10))
        if files is None and len(table.parts) == 1 and table.name.lower() in ctes:
            continue
        first = first_at[table.parts[0].meta["start"]]
        last = (closing_parenthesis(toks, first + 1) or first) if files else last_at[table.parts[-1].meta["end"]]
        start, end = toks[first].start, toks[last].end
        written = sql[start:end]
        streamed = isinstance(table.parent.parent if isinstance(table.parent, exp.Subquery) else table.parent,
                              exp.Stream)
        if streamed:
            parenthesised = toks[first - 1].text == "("
            start = toks[first - 2 if parenthesised else first - 1].start
            end = toks[last + 1].end if parenthesised else end
        name = None if files else ".".join(part.name for part in table.parts)
        found.append(Reference(start, end, written, streamed, name, files))
    return sorted(found, key=lambda ref: ref.start)


def referenced_tables(sql: str, layers: Collection[str]) -> list[tuple[str, bool]]:
    """The two-part names in ``layers`` that ``sql`` reads from, each once, with whether as a stream."""
    wanted = {layer.lower() for layer in layers}
    found: dict[str, bool] = {}
    for ref in references(sql):
        if ref.table is not None and ref.table.count(".") == 1 and ref.table.split(".")[0].lower() in wanted:
            found[ref.table] = found.get(ref.table, False) or ref.streamed
    return list(found.items())


def batch_query(sql: str) -> str:
    """``sql`` reading every table it streams as the table stands (``STREAM(x)`` as ``x``)."""
    for ref in reversed([ref for ref in references(sql) if ref.streamed]):
        sql = sql[:ref.start] + ref.written + sql[ref.end:]
    return sql
