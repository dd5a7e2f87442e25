"""A table defined in SQL, Lakeflow's way: what one ``.sql`` file declares
(``CREATE OR REFRESH STREAMING TABLE | MATERIALIZED VIEW layer.name [(columns, CONSTRAINT ...
EXPECT ...)] [COMMENT ...] AS query``; docs/guides/add-a-source.md, docs/quality.md). The
tables a definition reads, its upstream assets, are found in its query, never listed by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.tables.sql_refs import (
    Token,
    closing_parenthesis,
    depths,
    referenced_tables,
    split_commas,
    tokens,
    unquoted,
)
from lakehouse_assets.tables.sql_types import UnknownTypeError, spark_type

# The layers an upstream table of a SQL definition lives in.
SQL_LAYERS = ("bronze", "silver", "gold")
TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\.[A-Za-z][A-Za-z0-9_]*")


class SqlTableKind(StrEnum):
    """What a SQL definition creates."""

    streaming_table = "STREAMING TABLE"
    materialized_view = "MATERIALIZED VIEW"


class OnViolation(StrEnum):
    """What a row failing a ``CONSTRAINT ... EXPECT`` does."""

    warn = "WARN"  # no ON VIOLATION: kept, and counted
    drop_row = "DROP ROW"
    fail_update = "FAIL UPDATE"


@dataclass(frozen=True)
class SqlConstraint:
    """``CONSTRAINT name EXPECT (condition) [ON VIOLATION ...]``, or Lakeflow's
    ``@dp.expect(name, condition)`` and its kin: a SQL condition every row must meet, and what
    a row failing it does."""

    name: str
    condition: str
    on_violation: OnViolation

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the condition reads (:func:`condition_columns`)."""
        return condition_columns(self.condition)


@dataclass(frozen=True)
class SqlColumn:
    """``name [type] COMMENT '...'``: a column a definition describes; ``type``, a Spark SQL type
    every write casts the column to, is as written in lower case (empty when not given)."""

    name: str
    type: str
    comment: str


@dataclass(frozen=True)
class SqlDefinition:
    """One parsed definition: ``table`` (``layer.name``), its kind, its ``COMMENT``, its
    query, the tables the query reads (``layer.name``, read as a stream or not), its
    expectations, ``TBLPROPERTIES``, described columns and layout (:class:`TableClauses`)."""

    source: str  # where it was read from, for messages
    kind: SqlTableKind
    table: str
    comment: str | None
    query: str
    reads: tuple[tuple[str, bool], ...]
    constraints: tuple[SqlConstraint, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    columns: tuple[SqlColumn, ...] = ()
    partitioned_by: tuple[str, ...] = ()
    clustered_by: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether the streaming query rewrites its table whole (it groups at its top level)."""
        return self.kind is SqlTableKind.streaming_table and _groups_at_top_level(tokens(self.query))


class SqlDefinitionError(LakehouseError):
    """A SQL definition that cannot be made a table asset; the message names the file."""


def parse_sql_definition(text: str, source: str) -> SqlDefinition:
    """Parse the SQL definition ``text`` (read from ``source``)."""
    toks = tokens(text)
    words = [t.text.lower() for t in toks]

    def fail(what: str) -> SqlDefinitionError:
        return SqlDefinitionError(
            f"{source}: {what}. A SQL table is defined as CREATE OR REFRESH STREAMING TABLE layer.name "
            "[COMMENT '...'] AS SELECT ... FROM STREAM(layer.table) ..., or CREATE OR REFRESH "
            "MATERIALIZED VIEW layer.name [COMMENT '...'] AS SELECT ...")

    if words[:3] != ["create", "or", "refresh"]:
        raise fail(f"it does not start with CREATE OR REFRESH (found {_near(toks, 0)})")
    at = 3
    if words[at:at + 2] == ["streaming", "table"]:
        kind = SqlTableKind.streaming_table
    elif words[at:at + 2] == ["materialized", "view"]:
        kind = SqlTableKind.materialized_view
    else:
        raise fail(f"STREAMING TABLE or MATERIALIZED VIEW must follow CREATE OR REFRESH (found {_near(toks, at)})")
    at += 2
    table = "".join(t.text for t in toks[at:at + 3])
    if not TABLE_NAME.fullmatch(table) or table.split(".")[0].lower() not in SQL_LAYERS:
        raise fail(f"the table must be named layer.name in bronze, silver or gold (found {_near(toks, at)})")
    at += 3
    constraints, columns, clauses, at = table_elements(table, toks, at, source, text)
    if at >= len(words) or words[at] != "as":
        raise fail(f"AS and the query must follow the table's name and clauses (found {_near(toks, at)})")
    query = text[toks[at].end:].strip().rstrip(";").strip()
    try:
        reads = tuple(referenced_tables(query, SQL_LAYERS))
    except SqlglotError as exc:
        raise fail(f"its query could not be read to find the tables it reads ({str(exc).splitlines()[0]})") from exc
    streams = [name for name, stream in reads if stream]
    if kind is SqlTableKind.streaming_table and not streams:
        raise fail(f"the streaming table {table} reads no table with STREAM(layer.table), so it has "
                   "nothing to read incrementally; make it a MATERIALIZED VIEW, or read its source as STREAM(...)")
    if kind is SqlTableKind.materialized_view and streams:
        raise fail(f"the materialized view {table} reads {', '.join(streams)} as a stream; a materialized "
                   "view reads tables as they stand: drop STREAM(...), or make it a STREAMING TABLE")
    return SqlDefinition(source, kind, table, clauses.comment, query, reads, constraints, clauses.properties, columns,
                         clauses.partitioned_by, clauses.clustered_by)


def table_elements(table: str, toks: list[Token], at: int, source: str, sql: str, *, typed_columns: bool = False
                   ) -> tuple[tuple[SqlConstraint, ...], tuple[SqlColumn, ...], TableClauses, int]:
    """What follows ``table``'s name at token ``at`` of the text ``sql``: the expectations and
    described columns in its parentheses, if any, its clauses, and the index of the token after
    them. With ``typed_columns`` (a pipeline's ``name TYPE [COMMENT '...']``) a comment is optional."""
    constraints: tuple[SqlConstraint, ...] = ()
    columns: tuple[SqlColumn, ...] = ()
    if at < len(toks) and toks[at].text == "(":
        close = closing_parenthesis(toks, at)
        if close is None:
            raise SqlDefinitionError(f"{source}: the parenthesis after {table} is never closed")
        items = split_commas(toks[at + 1:close])
        constraints = tuple(_constraint(table, item, source, sql) for item in items
                            if item[0].text.lower() == "constraint")
        columns = tuple(_column(table, item, source, sql, typed_columns) for item in items
                        if item[0].text.lower() != "constraint")
        for what, names in (("a CONSTRAINT", [c.name.lower() for c in constraints]),
                            ("a column", [c.name.lower() for c in columns])):
            if len(set(names)) != len(names):
                raise SqlDefinitionError(f"{source}: {table} names {what} twice; give each its own name")
        at = close + 1
    clauses, at = _table_clauses(toks, at, source, table)
    return constraints, columns, clauses, at


def _column(table: str, toks: list[Token], source: str, sql: str, typed: bool = False) -> SqlColumn:
    """One ``name [type] COMMENT '...'`` (``typed``: ``name type [COMMENT '...']``)."""
    text = sql[toks[0].start:toks[-1].end]
    words = [t.text.lower() for t in toks]
    commented = len(toks) >= 3 and words[-2] == "comment" and toks[-1].kind == "string"
    if typed and not commented and toks[0].name is not None and len(toks) >= 2 and "comment" not in words:
        written_type = sql[toks[1].start:toks[-1].end].lower()
        _check_type(table, str(toks[0].name), written_type, source)
        return SqlColumn(str(toks[0].name), written_type, "")
    if typed and commented and len(toks) < 4:
        raise SqlDefinitionError(f"{source}: {table}: column {toks[0].text} has no type; write name TYPE "
                                 "[COMMENT '...'] (a Spark SQL type such as BIGINT, STRING, DOUBLE)")
    if (toks[0].name is None or not commented or "comment" in words[:-2]):
        raise SqlDefinitionError(
            f"{source}: {table} declares {text!r} in its parentheses; a SQL table takes expectations there "
            "(CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | ON VIOLATION FAIL UPDATE]) and "
            "column descriptions (name [type] COMMENT '...'); its columns come from its query")
    written_type = sql[toks[1].start:toks[-3].end].lower() if len(toks) > 3 else ""
    if written_type:
        _check_type(table, str(toks[0].name), written_type, source)
    return SqlColumn(str(toks[0].name), written_type, unquoted(toks[-1]))


def _check_type(table: str, column: str, written_type: str, source: str) -> None:
    try:
        spark_type(written_type)
    except UnknownTypeError as exc:
        raise SqlDefinitionError(f"{source}: {table}: column {column}: {exc}") from exc


@dataclass(frozen=True)
class TableClauses:
    """The clauses after a table's name and columns, in any order: ``COMMENT '...'``,
    ``TBLPROPERTIES (key = value, ...)`` (keys and values as written, quotes removed),
    ``PARTITIONED BY (column, ...)`` and ``CLUSTER BY (column, ...)``."""

    comment: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    partitioned_by: tuple[str, ...] = ()
    clustered_by: tuple[str, ...] = ()


def _table_clauses(toks: list[Token], at: int, source: str, table: str) -> tuple[TableClauses, int]:
    """The :class:`TableClauses` at token ``at``, and the index of the token after them."""
    comment: str | None = None
    properties: dict[str, str] = {}
    layout: dict[str, tuple[str, ...]] = {}
    while at < len(toks):
        word = toks[at].text.lower()
        if word == "comment":
            if at + 1 >= len(toks) or toks[at + 1].kind != "string" or comment is not None:
                raise SqlDefinitionError(f"{source}: {table}: COMMENT must be followed by a quoted string, once")
            comment = unquoted(toks[at + 1])
            at += 2
        elif word == "tblproperties":
            close = _parenthesis_after(toks, at, source, table, "TBLPROPERTIES", "(key = value, ...)")
            _properties(toks[at + 2:close], source, table, properties)
            at = close + 1
        elif word in ("partitioned", "cluster") and at + 1 < len(toks) and toks[at + 1].text.lower() == "by":
            clause = f"{word.upper()} BY"
            if word == "cluster" and at + 2 < len(toks) and toks[at + 2].text.lower() in ("auto", "none"):
                raise SqlDefinitionError(f"{source}: {table}: CLUSTER BY {toks[at + 2].text.upper()} is not "
                                         "supported here: name the clustering columns, CLUSTER BY (column, ...)")
            close = _parenthesis_after(toks, at + 1, source, table, clause, "(column, ...)")
            if clause in layout:
                raise SqlDefinitionError(f"{source}: {table}: {clause} is given twice")
            layout[clause] = tuple(_column_name(item, source, table, clause)
                                   for item in split_commas(toks[at + 3:close]))
            at = close + 1
        else:
            break
    clauses = TableClauses(comment, tuple(properties.items()), layout.get("PARTITIONED BY", ()),
                           layout.get("CLUSTER BY", ()))
    if clauses.partitioned_by and clauses.clustered_by:
        raise SqlDefinitionError(f"{source}: {table} is both PARTITIONED BY and CLUSTER BY: Delta allows one "
                                 "or the other; keep one of the two")
    return clauses, at


def _parenthesis_after(toks: list[Token], at: int, source: str, table: str, clause: str, shape: str) -> int:
    """The index of the parenthesis closing the one after the clause's keyword at ``at``."""
    close = closing_parenthesis(toks, at + 1) if at + 1 < len(toks) and toks[at + 1].text == "(" else None
    if close is None:
        raise SqlDefinitionError(f"{source}: {table}: {clause} must be followed by {shape}")
    return close


def _properties(items: list[Token], source: str, table: str, properties: dict[str, str]) -> None:
    """Add the ``key = value`` pairs of a ``TBLPROPERTIES`` list to ``properties``."""
    for item in split_commas(items):
        equals = next((i for i, t in enumerate(item) if t.text == "="), None)
        if equals is None or equals == 0 or equals != len(item) - 2:
            written = " ".join(t.text for t in item)
            raise SqlDefinitionError(
                f"{source}: {table}: TBLPROPERTIES takes key = value pairs (found {written!r}), e.g. "
                "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
        key = "".join(unquoted(t) for t in item[:equals])
        if key in properties:
            raise SqlDefinitionError(f"{source}: {table}: TBLPROPERTIES sets {key} twice")
        properties[key] = unquoted(item[-1])


def _column_name(item: list[Token], source: str, table: str, clause: str) -> str:
    """One column of a ``PARTITIONED BY`` / ``CLUSTER BY`` list: a plain name."""
    if len(item) != 1 or item[0].kind == "string":
        written = " ".join(t.text for t in item)
        raise SqlDefinitionError(f"{source}: {table}: {clause} takes column names (found {written!r}); "
                                 "a generated partition column is declared in the column list first")
    return unquoted(item[0])


def check_name(name: str) -> str:
    """An expectation's name as its asset check and quarantine reason name it: lower-case letters,
    digits and underscores (Lakeflow's ```Balance should be positive``` is ``balance_should_be_positive``)."""
    named = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")
    return named if named and named[0].isalpha() else f"expect_{named}"


def _constraint(table: str, toks: list[Token], source: str, sql: str) -> SqlConstraint:
    """One ``CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]``."""
    words = [t.text.lower() for t in toks]
    text = sql[toks[0].start:toks[-1].end]
    shape = ("CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | ON VIOLATION FAIL UPDATE]")
    if len(toks) < 4 or toks[1].name is None or words[2] != "expect" or toks[3].text != "(":
        raise SqlDefinitionError(f"{source}: {table}: {text!r} is not an expectation: write {shape}")
    close = closing_parenthesis(toks, 3)
    if close is None or close == 4:
        raise SqlDefinitionError(f"{source}: {table}: the condition of {toks[1].name} is empty or unclosed")
    name = check_name(str(toks[1].name))
    condition_sql = sql[toks[4].start:toks[close - 1].end]
    rest = words[close + 1:]
    actions = {(): OnViolation.warn, ("on", "violation", "drop", "row"): OnViolation.drop_row,
               ("on", "violation", "fail", "update"): OnViolation.fail_update}
    if tuple(rest) not in actions:
        raise SqlDefinitionError(
            f"{source}: {table}: CONSTRAINT {name} ends with {' '.join(rest)!r}; write ON VIOLATION DROP ROW, "
            "ON VIOLATION FAIL UPDATE, or nothing (keep and count failing rows)")
    try:
        condition_columns(condition_sql)
    except SqlDefinitionError as exc:
        raise SqlDefinitionError(f"{source}: {table}: CONSTRAINT {name}'s condition {exc}") from exc
    return SqlConstraint(name, condition_sql, actions[tuple(rest)])


def condition_columns(condition: str) -> tuple[str, ...]:
    """The columns an expectation's SQL ``condition`` reads; refused when none, or unparsed."""
    try:
        parsed = sqlglot.parse_one(condition, dialect="spark")
    except SqlglotError as exc:
        raise SqlDefinitionError(f"does not parse: {exc}") from exc
    columns = tuple(sorted({c.name for c in parsed.find_all(exp.Column)}))
    if not columns:
        raise SqlDefinitionError("reads no column")
    return columns


def _groups_at_top_level(toks: list[Token]) -> bool:
    nested = depths(toks)
    return any(nested[i] == 0 and toks[i].text.lower() == "group" and toks[i + 1].text.lower() == "by"
               for i in range(len(toks) - 1))


def _near(toks: list[Token], at: int) -> str:
    return repr(" ".join(t.text for t in toks[at:at + 3])) if at < len(toks) else "the end of the file"
