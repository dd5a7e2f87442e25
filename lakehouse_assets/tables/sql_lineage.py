"""Column lineage read from a query's SQL: which upstream columns each output column is
computed from. sqlglot parses the query (Spark's dialect); nothing is run, so it works the
same on both engines and before any table exists. A column whose sources cannot be told
without the upstream schemas (``SELECT *``, an unqualified column in a join) is left out
rather than guessed.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import lineage

from lakehouse_assets.tables.sql_refs import stream_references


def column_lineage(query: str, reads: list[str]) -> dict[str, list[tuple[str, str]]]:
    """``{output column: [(layer.table, column), ...]}`` for the columns of ``query``'s
    result, over the tables it ``reads`` (``layer.name``)."""
    plain = _without_stream(query)
    try:
        select = sqlglot.parse_one(plain, dialect="spark")
    except SqlglotError:
        return {}
    if not isinstance(select, exp.Query):
        return {}
    found: dict[str, list[tuple[str, str]]] = {}
    for output in select.named_selects:
        try:
            node = lineage(output, select, schema={}, dialect="spark")
        except (SqlglotError, KeyError, ValueError):
            continue
        sources = []
        for leaf in node.walk():
            if leaf.downstream or not isinstance(leaf.source, exp.Table):
                continue
            table = f"{leaf.source.db}.{leaf.source.name}" if leaf.source.db else leaf.source.name
            column = leaf.name.rsplit(".", 1)[-1]
            if table in reads and (table, column) not in sources:
                sources.append((table, column))
        if sources:
            found[output] = sources
    return found


def _without_stream(query: str) -> str:
    """The query with ``STREAM(layer.table)`` / ``STREAM layer.table`` read as ``layer.table``
    (the same columns): sqlglot does not know Spark's STREAM."""
    for ref in reversed(stream_references(query)):
        query = query[:ref.start] + f" {ref.written} " + query[ref.end:]
    return query
