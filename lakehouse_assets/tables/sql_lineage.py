"""Column lineage read from a query's SQL by sqlglot, nothing run: which upstream columns
each output column is computed from. A column whose sources cannot be told without the
upstream schemas (``SELECT *``, an unqualified column in a join) is left out rather than guessed.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import lineage

from lakehouse_assets.tables.sql_refs import batch_query


def column_lineage(query: str, reads: list[str]) -> dict[str, list[tuple[str, str]]]:
    """``{output column: [(layer.table, column), ...]}`` of ``query``'s result, over the tables it ``reads``."""
    try:  # STREAM(x) read as x: the same columns, and sqlglot's lineage does not know STREAM
        select = sqlglot.parse_one(batch_query(query), dialect="spark")
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

