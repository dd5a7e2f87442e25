"""A grouped streaming table's SQL, read as an incremental aggregate: the stream of source
rows it reads, and what it groups by and measures.

``SELECT keys..., AGG(expr) AS name, ... FROM STREAM(layer.table) [WHERE ...] GROUP BY keys``
with ``SUM``, ``COUNT``, ``MIN``, ``MAX`` and ``AVG`` / ``MEAN`` is kept by merging each batch's
partial results by key (:mod:`lakehouse_assets.aggregates`). A query that cannot be (a join, a
``HAVING``, ``COUNT(DISTINCT ...)``, an unnamed aggregate...) says why, and its table stays in
complete mode.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lakehouse_assets.aggregates import IncrementalAggregate, Measure
from lakehouse_assets.aggregates.spec import MeasureFunction

_FUNCTIONS: dict[type[exp.Expression], MeasureFunction] = {
    exp.Sum: "sum", exp.Count: "count", exp.Min: "min", exp.Max: "max", exp.Avg: "mean"}
_NAMED_FUNCTIONS: dict[str, MeasureFunction] = {"mean": "mean"}
_UNSUPPORTED = ("having", "order", "limit", "distinct", "qualify", "joins", "with", "windows", "laterals")


class NotIncremental(Exception):
    """Why a grouped query cannot be kept incrementally."""


def incremental_aggregate(query: str) -> tuple[str, IncrementalAggregate]:
    """The query of the source rows (``SELECT * FROM STREAM(...) [WHERE ...]``) and the
    aggregate ``query`` keeps; :class:`NotIncremental` saying why when it cannot be."""
    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except SqlglotError as exc:
        raise NotIncremental(f"the query does not parse: {exc}") from exc
    if not isinstance(tree, exp.Select) or not tree.args.get("group"):
        raise NotIncremental("it is not one SELECT ... GROUP BY")
    used = [arg.upper() for arg in _UNSUPPORTED if tree.args.get(arg)]
    if used:
        raise NotIncremental(f"it uses {', '.join(used)}")
    grouped = [g.sql(dialect="spark").lower() for g in tree.args["group"].expressions]
    keys: list[tuple[str, str]] = []
    measures: list[Measure] = []
    for projection in tree.expressions:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        name = projection.alias_or_name
        measure = _measure(inner)
        if measure is not None:
            if not isinstance(projection, exp.Alias):
                raise NotIncremental(f"{inner.sql(dialect='spark')} has no name: write it AS a column name")
            measures.append(Measure(name, measure[0], measure[1]))
            continue
        if inner.find(exp.AggFunc) is not None:
            raise NotIncremental(f"{inner.sql(dialect='spark')} computes with an aggregate")
        sql = inner.sql(dialect="spark")
        if sql.lower() not in grouped and name.lower() not in grouped:
            raise NotIncremental(f"{sql} is neither grouped by nor an aggregate")
        keys.append((name, sql))
    if len(keys) != len(grouped):
        raise NotIncremental("it groups by an expression it does not select, which is no column of the table")
    source = tree.copy()
    source.set("expressions", [exp.Star()])
    source.set("group", None)
    return source.sql(dialect="spark"), IncrementalAggregate(
        keys=tuple(keys), measures=tuple(measures), columns=tuple(p.alias_or_name for p in tree.expressions))


def _measure(node: exp.Expression) -> tuple[MeasureFunction, str] | None:
    function = _FUNCTIONS.get(type(node))
    if function is None and isinstance(node, exp.Anonymous):
        function = _NAMED_FUNCTIONS.get(str(node.name).lower())
    if function is None:
        return None
    arguments = [node.this] if not isinstance(node, exp.Anonymous) else list(node.expressions)
    if len(arguments) != 1 or arguments[0] is None:
        raise NotIncremental(f"{node.sql(dialect='spark')} takes one argument to be kept incrementally")
    argument = arguments[0]
    if isinstance(argument, exp.Distinct):
        raise NotIncremental(f"{node.sql(dialect='spark')} counts distinct values, which batches cannot add up")
    if argument.find(exp.AggFunc) is not None:
        raise NotIncremental(f"{node.sql(dialect='spark')} nests aggregates")
    return function, "*" if isinstance(argument, exp.Star) else argument.sql(dialect="spark")
