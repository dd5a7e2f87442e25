"""A routed SQL table's query run over its streamed source handed in as a view, as a Python
routed table reads its input: the rows the IO manager streams in a run, the quarantined rows
in a replay. The query's own text is kept, the stream replaced by the view; its top-level
SELECT also returns the streamed row whole (:data:`SOURCE_ROW`), which the quarantine keeps
as it came, so ``lakehouse trace`` follows it and a replay can run the query on it again.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lakehouse_assets.storage.merge import quote
from lakehouse_assets.tables.sql_definition import SqlDefinition, SqlDefinitionError
from lakehouse_assets.tables.sql_refs import depths, references, tokens

#: The column of the query's result holding the streamed row whole (dropped from both tables).
SOURCE_ROW = "_lakehouse_source_row"


@dataclass(frozen=True)
class StreamView:
    """``query`` reads ``view`` where the definition streamed ``stream``, and returns :data:`SOURCE_ROW`."""

    stream: str
    view: str
    query: str


def over_stream_view(definition: SqlDefinition, view: str) -> StreamView:
    """The definition's query reading its one streamed table from the temporary view ``view``;
    refused, naming the file, unless the FROM or a JOIN of its top-level SELECT reads it."""
    def refuse(why: str) -> SqlDefinitionError:
        return SqlDefinitionError(
            f"{definition.source}: {definition.table} drops rows into a quarantine, which keeps each row as "
            f"it came from the table read as a stream (to trace and replay it), but {why}. Read one table "
            "as STREAM(layer.table) in the FROM or a JOIN of the outer SELECT (filters in its WHERE), or "
            "drop ON VIOLATION DROP ROW.")

    refs = [ref for ref in references(definition.query) if ref.streamed and ref.table]
    if len(refs) != 1:
        names = ", ".join(str(ref.table) for ref in refs) or "none"
        raise refuse(f"its query reads {len(refs)} tables as streams ({names})")
    ref = refs[0]
    quoted_view = quote(view)
    over_view = definition.query[:ref.start] + quoted_view + definition.query[ref.end:]
    try:
        top = sqlglot.parse_one(over_view, dialect="spark")
    except SqlglotError as exc:
        raise refuse(f"its query could not be read to find the SELECT that reads {ref.table} ({exc})") from exc
    if not isinstance(top, exp.Select) or top.args.get("distinct"):
        raise refuse("its query is not one SELECT of rows (a UNION, a SELECT DISTINCT)")
    read = [t for t in [_from_table(top), *(j.this for j in top.args.get("joins") or [])]
            if isinstance(t, exp.Table) and t.name == view and not t.db]
    if not read:
        raise refuse(f"its outer SELECT does not read {ref.table} itself (a subquery or a WITH does)")
    alias = read[0].alias
    if not alias:
        # Named as Spark names an unaliased table, so the query's `name.column` still resolves.
        alias = str(ref.table).split(".")[-1]
        over_view = (definition.query[:ref.start] + f"{quoted_view} AS {quote(alias)}"
                     + definition.query[ref.end:])
    at = _outer_from(over_view)
    row = f", STRUCT({quote(alias)}.*) AS {SOURCE_ROW} "
    return StreamView(str(ref.table), view, over_view[:at] + row + over_view[at:])


def _from_table(select: exp.Select) -> exp.Expression | None:
    clause = select.args.get("from") or select.args.get("from_")
    return clause.this if clause is not None else None


def _outer_from(query: str) -> int:
    """Where the outer SELECT's FROM starts: the first FROM outside parentheses."""
    toks = tokens(query)
    for tok, depth in zip(toks, depths(toks), strict=True):
        if depth == 0 and tok.kind == "word" and tok.text.lower() == "from":
            return tok.start
    raise SqlDefinitionError(f"No FROM found in the query {query!r}")
