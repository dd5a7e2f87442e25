"""Column lineage read from a DataFrame's query plan: which upstream table columns each output
column is computed from, for a Python asset as its body built it.

Spark analyses the DataFrame (no job runs) and the plan is read as text, the one form both
engines give: classic PySpark and Spark Connect print the same ``== Analyzed Logical Plan ==``.
In it every column is an attribute ``name#id``; a computed one is ``expression AS name#id``
and reads the attributes its expression names; a leaf relation lists the attributes it reads.
A leaf is an upstream table when it reads under ``$LAKEHOUSE_ROOT/<layer>/<name>``: a Delta
stream sits under the alias the store gives it (``SubqueryAlias `delta:<path>```) or, read by
name, under the catalog's (``SubqueryAlias spark_catalog.<layer>.<name>``); a batch read of
the table's files shows them in the physical plan's scan of the same attributes.

Only what the plan says is reported: a column whose sources cannot be told (computed by an
operator read here as opaque, such as ``Expand`` or ``Generate``, or read from an empty
table, a local relation) is left out rather than guessed; a union's column reads the column
in the same position of each of its inputs. What decides a value
counts, not what filters or joins rows: a left join's key comes from the side it is selected from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.storage import local_path
from lakehouse_assets.storage.delta import STREAM_ALIAS_PREFIX
from lakehouse_assets.tables.lakehouse_tables import MEDALLION_LAYERS

#: ``{output column: [(layer.table, column), ...]}``
Lineage = dict[str, list[tuple[str, str]]]

# Scans print file locations cut at this many characters by default (100), which a deep
# lakehouse root can exceed before the table's folder is named; raised for the one explain.
_METADATA_LENGTH = "spark.sql.maxMetadataStringLength"
_ATTRIBUTE = re.compile(r"^(?P<name>.+?)#(?P<id>\d+)L?(?:-T\d+ms)?$")
_REFERENCE = re.compile(r"#(\d+)")
_SCAN_LOCATION = re.compile(r"Location: \w+(?:\(\d+ paths\))?\[(?P<first>[^,\]]+)")
_STREAM_ALIAS = re.compile(r"^SubqueryAlias `" + re.escape(STREAM_ALIAS_PREFIX) + r"(?P<path>.+)`$")
# A stream read by name (``STREAM(layer.name)``, ``readStream.table``): Spark's catalog alias.
_CATALOG_ALIAS = re.compile(r"^SubqueryAlias spark_catalog\.(?P<layer>[^.\s]+)\.(?P<name>[^.\s]+)$")
_DRAWING = " :|+-"  # the characters Spark draws a plan's tree with
_TREE_PREFIX = re.compile(r"^[\s:|+\-]*(?:\*\(\d+\)\s*)?~?")


def plan_lineage(df: DataFrame, root: Path | str) -> Lineage:
    """``{output column: [(layer.table, column), ...]}`` for the columns of ``df``, over the
    lakehouse tables under ``root`` it reads (as a stream or in batch)."""
    # A projection of the output by name puts the output's attributes, in order, on the
    # plan's first line, whatever operator the body ended with.
    projected = df.select(*[F.col("`" + column.replace("`", "``") + "`") for column in df.columns])
    return lineage_from_plan(explain_extended(projected), list(df.columns), root)


def explain_extended(df: DataFrame) -> str:
    """Spark's extended explain of ``df`` (parsed, analyzed, optimized and physical plans), as
    text, on a classic session or a Spark Connect one, without running a job."""
    conf = df.sparkSession.conf
    before = conf.get(_METADATA_LENGTH)
    conf.set(_METADATA_LENGTH, "100000")
    try:
        handle: Any = df
        if hasattr(handle, "_explain_string"):  # Spark Connect: the server explains the plan it is sent
            return str(handle._explain_string(extended=True))
        # Classic: what DataFrame.explain prints, returned instead.
        utils = handle._sc._jvm.PythonSQLUtils
        return str(utils.explainString(handle._jdf.queryExecution(), "extended"))
    finally:
        conf.set(_METADATA_LENGTH, before or "100")


def lineage_from_plan(explained: str, columns: list[str], root: Path | str) -> Lineage:
    """The lineage of ``columns`` (the output, in order) from an extended explain whose
    analyzed plan starts with a projection of exactly those columns."""
    analyzed = _section(explained, "Analyzed Logical Plan")[1:]  # the first line is the output's schema
    if not analyzed:
        return {}
    outputs = [item for items in _lists(_operator(analyzed[0])) for item in items]
    reads: dict[int, set[int]] = {}  # attribute -> the attributes its value is computed from
    leaves: dict[int, tuple[str, str]] = {}
    scans = _scans(explained)
    aliased: str | None = None  # the table path of the stream the previous line aliased
    for line in analyzed:
        operator = _operator(line)
        stream = _STREAM_ALIAS.match(operator)
        by_name = _CATALOG_ALIAS.match(operator)
        for items in _lists(operator):
            for item in items:
                head, alias, tail = item.rpartition(" AS ")
                target = _ATTRIBUTE.match(tail) if alias else None
                if target:
                    reads.setdefault(int(target["id"]), set()).update(int(i) for i in _REFERENCE.findall(head))
        leaves.update(_leaf(operator, scans, root, aliased))
        aliased = (stream["path"] if stream
                   else str(Path(root) / by_name["layer"] / by_name["name"]) if by_name else None)
    _add_unions(_tree(analyzed), reads)
    found: Lineage = {}
    for column, item in zip(columns, outputs, strict=False):
        attribute = _ATTRIBUTE.match(item)
        if attribute is None:
            continue
        sources = _sources(int(attribute["id"]), reads, leaves, set())
        if sources:
            found[column] = sources
    return found


@dataclass
class _Node:
    """One operator of a plan, with its children as printed (subqueries first, if any)."""

    operator: str
    children: list[_Node] = field(default_factory=list)


def _tree(lines: list[str]) -> _Node:
    """The plan's operators as a tree, by the indentation of their tree drawing."""
    root = _Node(_operator(lines[0]))
    stack: list[tuple[int, _Node]] = [(0, root)]
    for line in lines[1:]:
        depth = len(line) - len(line.lstrip(_DRAWING))
        node = _Node(_operator(line))
        while len(stack) > 1 and stack[-1][0] >= depth:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((depth, node))
    return root


def _add_unions(node: _Node, reads: dict[int, set[int]]) -> None:
    """A union's output attributes are its first child's: each also reads the attribute in
    the same position of every other child."""
    if node.operator.startswith("Union") and len(node.children) > 1:
        first, *others = [_output(child) for child in node.children]
        for position, attribute in enumerate(first):
            for other in others:
                if position < len(other):
                    reads.setdefault(attribute, set()).add(other[position])
    for child in node.children:
        _add_unions(child, reads)


def _output(node: _Node) -> list[int]:
    """The attributes an operator outputs, in order (as far as this reading of plans goes)."""
    lists = _lists(node.operator)
    if node.operator.startswith("Project ") and lists:
        return _ids(lists[0])
    if node.operator.startswith("Aggregate ") and len(lists) > 1:
        return _ids(lists[1])
    if not node.children:  # a relation: its last list is the attributes it reads
        attributes = [items for items in lists if items and len(_ids(items)) == len(items)]
        return _ids(attributes[-1]) if attributes else []
    if node.operator.startswith("Join ") and len(node.children) > 1:
        left, right = _output(node.children[-2]), _output(node.children[-1])
        return left if node.operator.startswith(("Join LeftSemi", "Join LeftAnti")) else left + right
    if node.operator.startswith("Union"):
        return _output(node.children[0])
    # Filters, sorts, aliases, watermarks, ...: the child's (printed after any subquery).
    return _output(node.children[-1])


def _ids(items: list[str]) -> list[int]:
    """The attribute each item defines or names (``a#1``, ``expression AS b#2``)."""
    found = []
    for item in items:
        attribute = _ATTRIBUTE.match(item.rpartition(" AS ")[2])
        if attribute:
            found.append(int(attribute["id"]))
    return found


def _sources(attribute: int, reads: Mapping[int, set[int]], leaves: Mapping[int, tuple[str, str]],
             seen: set[int]) -> list[tuple[str, str]]:
    if attribute in seen:
        return []
    seen.add(attribute)
    found: list[tuple[str, str]] = [leaves[attribute]] if attribute in leaves else []
    for read in sorted(reads.get(attribute, ())):
        for source in _sources(read, reads, leaves, seen):
            if source not in found:
                found.append(source)
    return found


def _leaf(operator: str, scans: Mapping[int, str], root: Path | str,
          aliased: str | None) -> Iterator[tuple[int, tuple[str, str]]]:
    """The attributes a leaf relation reads, each with its table and column; nothing for a
    relation that reads no lakehouse table. ``aliased``: the path the line above aliased."""
    lists = _lists(operator)
    if operator.startswith("StreamingRelation ") and aliased and lists:
        path, attributes = aliased, lists[0]
    elif operator.startswith("Relation ") and lists:
        attributes = lists[0]
        ids = [int(m["id"]) for m in map(_ATTRIBUTE.match, attributes) if m]
        path = next((scans[i] for i in ids if i in scans), "")
    else:
        return
    table = table_of(path, root)
    if table is None:
        return
    for item in attributes:
        attribute = _ATTRIBUTE.match(item)
        if attribute:
            yield int(attribute["id"]), (table, attribute["name"])


def table_of(path: str, root: Path | str) -> str | None:
    """``layer.name`` of the lakehouse table a data path lies in (the table's folder or a file
    under it), or None for a path outside the lakehouse's tables."""
    local = local_path(path) if path.strip() else ""
    if not local:
        return None
    try:
        parts = Path(local).resolve().relative_to(Path(root).resolve()).parts
    except ValueError:
        return None
    if len(parts) < 2 or parts[0] not in MEDALLION_LAYERS:
        return None
    return f"{parts[0]}.{parts[1]}"


def _scans(explained: str) -> dict[int, str]:
    """The first file each batch scan of the physical plan reads, by the attributes it reads."""
    found: dict[int, str] = {}
    for line in _section(explained, "Physical Plan"):
        operator = _operator(line)
        location = _SCAN_LOCATION.search(operator)
        if not operator.startswith(("FileScan ", "BatchScan ")) or location is None:
            continue
        for item in (_lists(operator) or [[]])[0]:
            attribute = _ATTRIBUTE.match(item)
            if attribute:
                found[int(attribute["id"])] = location["first"]
    return found


def _section(explained: str, title: str) -> list[str]:
    lines = explained.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == f"== {title} =="), None)
    if start is None:
        return []
    section = []
    for line in lines[start + 1:]:
        if line.startswith("== "):
            break
        if line.strip():
            section.append(line)
    return section


def _operator(line: str) -> str:
    """A plan line without its tree drawing, streaming marker and codegen stage."""
    return _TREE_PREFIX.sub("", line, count=1)


def _lists(operator: str) -> list[list[str]]:
    """The bracketed lists of an operator's arguments (``[a#1, b#2 AS c#3]``), outside any
    parentheses, each split into its items at its own commas."""
    found: list[list[str]] = []
    parens = brackets = 0
    item: list[str] = []
    for char in operator:
        if brackets == 0 and parens == 0:
            if char == "[":
                brackets, item = 1, []
                found.append([])
            elif char == "(":
                parens += 1
            continue
        if brackets == 0:  # inside parentheses outside a list
            parens += {"(": 1, ")": -1}.get(char, 0)
            continue
        if char in "([":
            parens += char == "("
            brackets += char == "["
        elif char in ")]":
            parens -= char == ")"
            brackets -= char == "]"
            if brackets == 0:
                found[-1].append("".join(item).strip())
                continue
        if char == "," and brackets == 1 and parens == 0:
            found[-1].append("".join(item).strip())
            item = []
            continue
        item.append(char)
    return [[i for i in items if i] for items in found]
