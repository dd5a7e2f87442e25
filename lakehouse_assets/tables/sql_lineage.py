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

from lakehouse_assets.tables.sql_refs import find_table_refs, rewrite


def column_lineage(query: str, reads: list[str]) -> dict[str, list[tuple[str, str]]]:
    """``{output column: [(layer.table, column), ...]}`` for the columns of ``query``'s
    result, over the tables it ``reads`` (``layer.name``)."""
    plain = _without_stream(query, reads)
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


def _without_stream(query: str, reads: list[str]) -> str:
    """The query with ``STREAM(layer.table)`` read as ``layer.table``: the same columns."""
    refs = [ref for ref in find_table_refs(query, reads) if ref.stream]
    if not refs:
        return query
    plain = rewrite(query, refs, ["\0" for _ in refs])
    for ref in refs:
        plain = plain.replace("`\0`", ref.table, 1)
    return plain


def group_keys(query: str, reads: list[str]) -> list[str] | None:
    """The output columns that identify a row of a grouping ``query``'s result: for each
    ``GROUP BY`` expression, the selected column computing it. None when the query does not
    group at its top level, or an expression it groups by is not selected (then its rows
    have no key in the result, and the table can only be rewritten whole)."""
    try:
        select = sqlglot.parse_one(_without_stream(query, reads), dialect="spark")
    except SqlglotError:
        return None
    group = select.args.get("group") if isinstance(select, exp.Select) else None
    if group is None or not group.expressions:
        return None
    outputs: dict[exp.Expression, str] = {}
    for projection in select.expressions:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        outputs.setdefault(inner, projection.alias_or_name)
    keys = []
    for expression in group.expressions:
        name = outputs.get(expression)
        if name is None:  # GROUP BY an output's alias
            name = next((n for n in outputs.values() if isinstance(expression, exp.Column)
                         and not expression.table and n == expression.name), None)
        if name is None:
            return None
        keys.append(name)
    return keys
