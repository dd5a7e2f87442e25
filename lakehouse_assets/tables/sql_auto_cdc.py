"""An AUTO CDC table defined in SQL, Lakeflow's way: a streaming table, and the flow that
applies a change feed to it (``CREATE FLOW name AS AUTO CDC INTO ...``, or Lakeflow's older
``APPLY CHANGES INTO ...``, a flow named after its table; docs/guides/cdc.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lakehouse_assets.cdc import AutoCdc
from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.tables.sql_definition import (
    SQL_LAYERS,
    TABLE_NAME,
    SqlColumn,
    SqlDefinitionError,
    TableClauses,
    table_elements,
)
from lakehouse_assets.tables.sql_refs import Token, statements, tokens

# The clauses of CREATE FLOW ... AS AUTO CDC INTO ... FROM ..., by their first words.
_CLAUSES = {("keys",): "keys", ("apply", "as", "delete", "when"): "deletes",
            ("apply", "as", "truncate", "when"): "truncates", ("sequence", "by"): "sequence",
            ("columns",): "columns", ("stored", "as", "scd", "type"): "type",
            ("track", "history", "on"): "track"}
SHAPE = ("CREATE OR REFRESH STREAMING TABLE layer.name [(column [type] COMMENT '...', ...)] [COMMENT '...'] "
         "[TBLPROPERTIES (...)]; "
         "CREATE FLOW name AS AUTO CDC INTO "
         "layer.name FROM STREAM(layer.table) KEYS (columns) [APPLY AS DELETE WHEN condition] [APPLY AS "
         "TRUNCATE WHEN condition] SEQUENCE BY column [COLUMNS (columns) | COLUMNS * EXCEPT (columns)] "
         "[STORED AS SCD TYPE 1 | 2] [TRACK HISTORY ON (columns) | TRACK HISTORY ON * EXCEPT (columns)]")


#: Reads a table's name at a statement's token: the name, and the index of the token after it.
TableAt = Callable[[list[Token], int, str], tuple[str, int]]

@dataclass(frozen=True)
class SqlAutoCdc:
    """A parsed AUTO CDC definition: the table (``layer.name``), its ``COMMENT``, the flow's
    name, the table its changes stream from (``layer.name``), how they apply, and the table's
    ``TBLPROPERTIES``, described columns and layout, as a SQL definition's."""

    source: str
    table: str
    comment: str | None
    flow: str
    changes_from: str
    spec: AutoCdc
    properties: tuple[tuple[str, str], ...] = ()
    columns: tuple[SqlColumn, ...] = ()
    partitioned_by: tuple[str, ...] = ()
    clustered_by: tuple[str, ...] = ()


def is_auto_cdc(text: str) -> bool:
    """Whether a SQL file's text defines an AUTO CDC flow (or APPLY CHANGES INTO)."""
    words = [t.text.lower() for t in tokens(text)]
    return any(words[i:i + 3] in (["as", "auto", "cdc"], ["apply", "changes", "into"]) for i in range(len(words)))


def parse_auto_cdc(text: str, source: str) -> SqlAutoCdc:
    """Parse a streaming table and the AUTO CDC flow into it from ``text`` (read from ``source``)."""
    toks = tokens(text)
    parts = statements(toks)
    if len(parts) != 2:
        raise _error(source, f"it holds {len(parts)} statement(s); an AUTO CDC table is two, ended by ';'")
    table, clauses, described = _streaming_table(parts[0], text, source)
    flow, target, changes_from, spec = parse_auto_cdc_flow(parts[1], text, source)
    if target.lower() != table.lower():
        raise _error(source, f"the flow writes {target}, but the file creates {table}")
    return SqlAutoCdc(source, table, clauses.comment, flow, changes_from, spec, clauses.properties, described,
                      clauses.partitioned_by, clauses.clustered_by)


def parse_auto_cdc_flow(toks: list[Token], text: str, source: str,
                        table_at: TableAt | None = None) -> tuple[str, str, str, AutoCdc]:
    """``CREATE FLOW name AS AUTO CDC INTO ...`` or ``APPLY CHANGES INTO table ...`` (a flow named
    after its table): its name, target, the table it streams changes from, and how they apply.
    ``table_at`` reads a table's name (``layer.name`` by default; a pipeline's as it resolves them)."""
    flow, target, changes_from, clauses = _flow(toks, source, table_at)
    for required in ("keys", "sequence"):
        if required not in clauses:
            raise _error(source, f"the flow has no {'KEYS' if required == 'keys' else 'SEQUENCE BY'} clause")
    keys = _names(clauses["keys"], source, "KEYS")
    sequence = _names(clauses["sequence"], source, "SEQUENCE BY", parenthesised=False)
    if len(sequence) != 1:
        raise _error(source, "SEQUENCE BY takes one column")
    columns, except_columns = _column_choice(clauses.get("columns"), source, "COLUMNS")
    track, track_except = _column_choice(clauses.get("track"), source, "TRACK HISTORY ON")
    scd_type = 1
    if "type" in clauses:
        scd = [t.text for t in clauses["type"]]
        if scd not in (["1"], ["2"]):
            raise _error(source, f"STORED AS SCD TYPE takes 1 or 2 (found {' '.join(scd)!r})")
        scd_type = int(scd[0])
    try:
        spec = AutoCdc(keys=keys, sequence_by=sequence[0], stored_as_scd_type=scd_type,  # type: ignore[arg-type]
                       apply_as_deletes=_condition(clauses.get("deletes"), text),
                       apply_as_truncates=_condition(clauses.get("truncates"), text),
                       column_list=columns, except_column_list=except_columns or (),
                       track_history_column_list=track, track_history_except_column_list=track_except)
    except ConfigurationError as exc:
        raise _error(source, str(exc)) from exc
    return flow, target, changes_from, spec


def _streaming_table(toks: list[Token], text: str, source: str
                     ) -> tuple[str, TableClauses, tuple[SqlColumn, ...]]:
    words = [t.text.lower() for t in toks]
    if words[:5] != ["create", "or", "refresh", "streaming", "table"]:
        raise _error(source, "the first statement must be CREATE OR REFRESH STREAMING TABLE layer.name")
    table, at = _table_at(toks, 5, source)
    constraints, columns, clauses, at = table_elements(table, toks, at, source, text)
    if constraints:
        raise _error(source, f"{table} declares expectations, which an AUTO CDC table does not take")
    if at < len(toks):
        rest = toks[at:]
        raise _error(source, "only COMMENT, TBLPROPERTIES, PARTITIONED BY and CLUSTER BY may follow the "
                             f"table's name (found {text[rest[0].start:rest[-1].end]!r})")
    return table, clauses, columns


def _flow(toks: list[Token], source: str,
          table_at: TableAt | None = None) -> tuple[str, str, str, dict[str, list[Token]]]:
    table_at = table_at or _table_at
    words = [t.text.lower() for t in toks]
    if words[:3] == ["apply", "changes", "into"] and len(words) > 4:
        target, at = table_at(toks, 3, source)
        flow = target.rsplit(".", 1)[-1]
    elif len(words) >= 8 and words[:2] == ["create", "flow"] and words[3:7] == ["as", "auto", "cdc", "into"]:
        flow = str(toks[2].name)
        target, at = table_at(toks, 7, source)
    else:
        raise _error(source, "the second statement must be CREATE FLOW name AS AUTO CDC INTO layer.name ...")
    if words[at:at + 3] == ["from", "stream", "("]:
        changes_from, at = table_at(toks, at + 3, source)
        if at >= len(toks) or toks[at].text != ")":
            raise _error(source, "the flow must read its changes FROM STREAM(layer.table)")
        at += 1
    elif words[at:at + 2] == ["from", "stream"] and at + 2 < len(toks) and toks[at + 2].text != "(":
        changes_from, at = table_at(toks, at + 2, source)
    else:
        raise _error(source, "the flow must read its changes FROM STREAM(layer.table)")
    clauses: dict[str, list[Token]] = {}
    current: str | None = None
    while at < len(toks):
        clause = next(((name, len(lead)) for lead, name in _CLAUSES.items()
                       if tuple(words[at:at + len(lead)]) == lead), None)
        if clause is not None:
            current, skip = clause
            if current in clauses:
                raise _error(source, f"the flow repeats a clause ({' '.join(words[at:at + skip]).upper()})")
            clauses[current] = []
            at += skip
            continue
        if current is None:
            raise _error(source, f"unexpected {toks[at].text!r} after FROM STREAM(...)")
        clauses[current].append(toks[at])
        at += 1
    return flow, target, changes_from, clauses


def _table_at(toks: list[Token], at: int, source: str) -> tuple[str, int]:
    name = "".join(t.text for t in toks[at:at + 3])
    if not TABLE_NAME.fullmatch(name) or name.split(".")[0].lower() not in SQL_LAYERS:
        raise _error(source, f"a table must be named layer.name in bronze, silver or gold (found {name!r})")
    return name, at + 3


def _names(toks: list[Token], source: str, clause: str, *, parenthesised: bool = True) -> list[str]:
    inner = toks
    if parenthesised:
        if len(toks) < 2 or toks[0].text != "(" or toks[-1].text != ")":
            raise _error(source, f"{clause} takes column names in parentheses")
        inner = toks[1:-1]
    names = [t.name for t in inner if t.text != ","]
    if not names or any(n is None for n in names) or len(names) != (len(inner) + 1) // 2:
        raise _error(source, f"{clause} takes column names separated by commas")
    return [str(n) for n in names]


def _column_choice(toks: list[Token] | None, source: str, clause: str) -> tuple[list[str] | None, list[str] | None]:
    """``(columns)`` or ``columns`` as (columns, None); ``* EXCEPT (columns)`` as (None, columns)."""
    if toks is None:
        return None, None
    if toks and toks[0].text == "*":
        if len(toks) < 2 or toks[1].text.lower() != "except":
            raise _error(source, f"{clause} * must be followed by EXCEPT (columns)")
        return None, _names(toks[2:], source, f"{clause} * EXCEPT")
    return _names(toks, source, clause, parenthesised=bool(toks) and toks[0].text == "("), None


def _condition(toks: list[Token] | None, text: str) -> str | None:
    return text[toks[0].start:toks[-1].end] if toks else None


def _error(source: str, what: str) -> SqlDefinitionError:
    return SqlDefinitionError(f"{source}: {what}. An AUTO CDC table is written: {SHAPE}")
