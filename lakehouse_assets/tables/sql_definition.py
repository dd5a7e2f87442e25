"""A table defined in SQL, Lakeflow's way: what one ``.sql`` file declares.

::

    CREATE OR REFRESH STREAMING TABLE gold.device_counts
    COMMENT 'Recordings per device'
    AS SELECT device_id, COUNT(device_id) AS total_recordings
       FROM STREAM(bronze.recordings) WHERE device_id IS NOT NULL GROUP BY device_id

A ``STREAMING TABLE`` reads at least one table with ``STREAM(layer.table)`` and is kept by an
incremental query with its own checkpoint: appended to, or, when the query groups at its top
level (an aggregate with no watermark), rewritten in complete mode as the seeds write gold.
A ``MATERIALIZED VIEW`` reads tables as they stand and is recomputed whole by each run.
The tables a definition reads, its upstream assets, are found in its query, never listed by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.tables.sql_refs import Token, referenced_tables, tokens

# The layers an upstream table of a SQL definition lives in.
SQL_LAYERS = ("bronze", "silver", "gold")
_TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\.[A-Za-z][A-Za-z0-9_]*")


class SqlTableKind(StrEnum):
    """What a SQL definition creates."""

    streaming_table = "STREAMING TABLE"
    materialized_view = "MATERIALIZED VIEW"


@dataclass(frozen=True)
class SqlDefinition:
    """One parsed definition: ``table`` (``layer.name``), its kind, its ``COMMENT``, its
    query, and the tables the query reads (``layer.name``, read as a stream or not)."""

    source: str  # where it was read from, for messages
    kind: SqlTableKind
    table: str
    comment: str | None
    query: str
    reads: tuple[tuple[str, bool], ...]

    @property
    def complete(self) -> bool:
        """Whether the streaming query rewrites its table whole (it groups at its top level)."""
        return self.kind is SqlTableKind.streaming_table and _groups_at_top_level(tokens(self.query))


class SqlDefinitionError(LakehouseError):
    """A SQL definition that cannot be made a table asset; the message names the file."""


def parse_sql_definition(text: str, source: str) -> SqlDefinition:
    """Parse ``CREATE OR REFRESH STREAMING TABLE | MATERIALIZED VIEW layer.name [COMMENT '...']
    AS query`` from ``text`` (read from ``source``)."""
    toks = tokens(text)
    words = [t.text.lower() for t in toks]

    def fail(what: str) -> SqlDefinitionError:
        return SqlDefinitionError(
            f"{source}: {what}. A SQL table is defined as CREATE OR REFRESH STREAMING TABLE layer.name "
            "[COMMENT '...'] AS SELECT ... FROM STREAM(layer.table) ..., or CREATE OR REFRESH "
            "MATERIALIZED VIEW layer.name [COMMENT '...'] AS SELECT ...")

    at = 0
    for expected in ("create", "or", "refresh"):
        if at >= len(words) or words[at] != expected:
            raise fail(f"it does not start with CREATE OR REFRESH (found {_near(toks, at)})")
        at += 1
    if words[at:at + 2] == ["streaming", "table"]:
        kind = SqlTableKind.streaming_table
    elif words[at:at + 2] == ["materialized", "view"]:
        kind = SqlTableKind.materialized_view
    else:
        raise fail(f"STREAMING TABLE or MATERIALIZED VIEW must follow CREATE OR REFRESH (found {_near(toks, at)})")
    at += 2
    table = "".join(t.text for t in toks[at:at + 3])
    if not _TABLE_NAME.fullmatch(table) or table.split(".")[0].lower() not in SQL_LAYERS:
        raise fail(f"the table must be named layer.name in bronze, silver or gold (found {_near(toks, at)})")
    at += 3
    if at < len(toks) and toks[at].text == "(":
        raise SqlDefinitionError(
            f"{source}: {table} declares columns or CONSTRAINT ... EXPECT expectations, which SQL "
            "definitions do not take yet; check rows in the query's WHERE, or declare the table in Python "
            "with its contract (quality/) until SQL expectations land.")
    comment = None
    if at < len(words) and words[at] == "comment":
        if at + 1 >= len(toks) or toks[at + 1].kind != "string":
            raise fail("COMMENT must be followed by a quoted string")
        comment = re.sub(r"\\(.)", r"\1", toks[at + 1].text[1:-1])  # Spark's escapes: \' is '
        at += 2
    if at >= len(words) or words[at] != "as":
        raise fail(f"AS and the query must follow the table's name and comment (found {_near(toks, at)})")
    query = text[toks[at].end:].strip().rstrip(";").strip()
    reads = tuple(referenced_tables(query, SQL_LAYERS))
    streams = [name for name, stream in reads if stream]
    if kind is SqlTableKind.streaming_table and not streams:
        raise fail(f"the streaming table {table} reads no table with STREAM(layer.table), so it has "
                   "nothing to read incrementally; make it a MATERIALIZED VIEW, or read its source as STREAM(...)")
    if kind is SqlTableKind.materialized_view and streams:
        raise fail(f"the materialized view {table} reads {', '.join(streams)} as a stream; a materialized "
                   "view reads tables as they stand: drop STREAM(...), or make it a STREAMING TABLE")
    return SqlDefinition(source, kind, table, comment, query, reads)


def _groups_at_top_level(toks: list[Token]) -> bool:
    depth = 0
    for i, tok in enumerate(toks):
        if tok.text == "(":
            depth += 1
        elif tok.text == ")":
            depth -= 1
        elif depth == 0 and tok.text.lower() == "group" and i + 1 < len(toks) and toks[i + 1].text.lower() == "by":
            return True
    return False


def _near(toks: list[Token], at: int) -> str:
    return repr(" ".join(t.text for t in toks[at:at + 3])) if at < len(toks) else "the end of the file"
