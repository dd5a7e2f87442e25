"""A grouped streaming table's SQL: the columns that identify its groups, by which each
micro-batch's changed groups (Spark's stateful aggregation, output mode ``update``) are merged
into the table. A query whose rows cannot be merged that way says why, and its table stays in
complete mode (docs/guides/incremental-gold.md).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

#: Clauses a table merged group by group cannot keep: a group HAVING leaves out keeps its old
#: row; Spark orders and limits a streaming aggregate in complete mode only.
_WHOLE_ONLY = ("having", "order", "limit", "qualify")
#: GROUP BY forms whose groups are not the selected columns' values.
_GROUPINGS = ("grouping_sets", "cube", "rollup", "totals", "all")


class NotKeyed(Exception):
    """Why a grouped query's rows cannot be merged by the columns it groups by."""


def group_keys(query: str) -> tuple[tuple[str, str], ...]:
    """The columns ``query`` groups by, as ``(column name, SQL expression)`` pairs in select
    order; :class:`NotKeyed` says why there are none to merge by."""
    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except SqlglotError as exc:
        raise NotKeyed(f"the query does not parse: {exc}") from exc
    group = tree.args.get("group") if isinstance(tree, exp.Select) else None
    if group is None:
        raise NotKeyed("it is not one SELECT ... GROUP BY")
    used = [arg.upper() for arg in (*_WHOLE_ONLY, *_GROUPINGS) if tree.args.get(arg) or group.args.get(arg)]
    if used:
        raise NotKeyed(f"it uses {', '.join(used)}")
    grouped = {g.sql(dialect="spark").lower() for g in group.expressions}
    keys = []
    for projection in tree.expressions:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        sql = inner.sql(dialect="spark")
        if sql.lower() in grouped or projection.alias_or_name.lower() in grouped:
            keys.append((projection.alias_or_name, sql))
    if len(keys) != len(grouped):
        raise NotKeyed("it groups by an expression it does not select, which is no column of the table")
    return tuple(keys)
