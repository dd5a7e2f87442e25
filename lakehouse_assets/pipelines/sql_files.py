"""A pipeline's SQL files, Lakeflow's and Spark Declarative Pipelines' SQL: each statement
(separated by ``;``, or a notebook export's cells) registered as pyspark's own SQL would
register it, as the outputs and flows of :class:`~.graph.PipelineRegistry`, so a SQL dataset
is mapped exactly as a Python one is. What maps and what stops the load (naming the file, the
line and the construct) is listed in docs/guides/lakeflow.md.
"""

from __future__ import annotations

import dataclasses
import re
from bisect import bisect_right
from pathlib import Path

from pyspark.pipelines.flow import Flow
from pyspark.pipelines.output import MaterializedView, Output, StreamingTable, TemporaryView
from pyspark.pipelines.source_code_location import SourceCodeLocation
from pyspark.sql.types import StructField, StructType

from lakehouse_assets.pipelines.auto_cdc import change_feed
from lakehouse_assets.pipelines.graph import EXPECTATIONS_ATTRIBUTE, PipelineRegistry
from lakehouse_assets.pipelines.session import PipelineConf
from lakehouse_assets.pipelines.spec import PipelineError, PipelineProject, SourceLocation
from lakehouse_assets.pipelines.sql_query import sql_flow
from lakehouse_assets.tables.sql_auto_cdc import parse_auto_cdc_flow
from lakehouse_assets.tables.sql_definition import SqlDefinitionError, TableClauses, table_elements
from lakehouse_assets.tables.sql_refs import Token, statements, tokens, unquoted
from lakehouse_assets.tables.sql_types import spark_type

_SUBSTITUTION = re.compile(r"\$\{([^}]*)\}")
_NOTEBOOK = "-- Databricks notebook source"
_CELL_BREAK = re.compile(r"^-- COMMAND -{3,}[ \t]*$", re.MULTILINE)
#: Words that may stand between CREATE [OR REFRESH] and TABLE / VIEW.
_MODIFIERS = ("streaming", "materialized", "temporary", "temp", "live", "private")
#: Clauses a dataset may have that the lakehouse does not map, by their first word.
_UNMAPPED_CLAUSES = {
    "location": "LOCATION (the lakehouse keeps each table at $LAKEHOUSE_ROOT/<schema>/<name>)",
    "using": "USING (the lakehouse's tables are Delta tables)",
    "with": "WITH ROW FILTER (row filters are Unity Catalog's)",
    "row": "ROW FILTER (row filters are Unity Catalog's)",
    "mask": "MASK (column masks are Unity Catalog's)",
    "schedule": "SCHEDULE (a table is refreshed by its asset's automation)",
    "trigger": "TRIGGER ON UPDATE (a table is refreshed by its asset's automation)",
}


@dataclasses.dataclass
class _FileState:
    """What a file's earlier statements set for the later ones."""

    project: PipelineProject
    spark_conf: dict[str, str]


def register_sql_file(registry: PipelineRegistry, sql_text: str, file: Path) -> None:
    """Register the datasets the SQL file ``file`` (its text ``sql_text``) declares."""
    if sql_text.lstrip().startswith(_NOTEBOOK):
        sql_text = _CELL_BREAK.sub(";", sql_text)  # a cell ends its statement; lines keep their numbers
    text = _substituted(sql_text, file, PipelineConf(registry.project, registry.settings))
    state = _FileState(registry.project, {})
    for statement in statements(tokens(text)):
        _register(registry, text, statement, file, state)


def _substituted(text: str, file: Path, conf: PipelineConf) -> str:
    """``text`` with each ``${key}`` outside comments replaced by the configuration's value."""
    significant = tokens(text)
    starts = [tok.start for tok in significant]
    for match in reversed(list(_SUBSTITUTION.finditer(text))):
        at = bisect_right(starts, match.start()) - 1
        if at < 0 or significant[at].end <= match.start():
            continue  # inside a comment
        key = match.group(1).strip()
        value = conf.get(key, None)
        if value is None:
            line = text.count("\n", 0, match.start()) + 1
            raise PipelineError(f"{file}:{line}: ${{{key}}} names a setting the pipeline's configuration does not "
                                "set; add it under configuration: in the pipeline's spec")
        text = text[:match.start()] + str(value) + text[match.end():]
    return text


def _register(registry: PipelineRegistry, text: str, toks: list[Token], file: Path, state: _FileState) -> None:
    words = [tok.text.lower() if tok.kind == "word" else tok.text for tok in toks]
    where = SourceLocation(file, text.count("\n", 0, toks[0].start) + 1)
    written = " ".join(tok.text for tok in toks[:6])
    if words[0] == "set":
        if "=" not in words:
            return  # SET key shows a setting; a pipeline has no one to show it to
        equals = words.index("=")
        if equals < 2 or equals == len(words) - 1:
            raise PipelineError(f"{where}: SET takes key = value (found {written!r})")
        key = "".join(unquoted(tok) for tok in toks[1:equals])
        state.spark_conf[key] = text[toks[equals + 1].start:toks[-1].end] if len(toks) > equals + 2 \
            else unquoted(toks[-1])
        return
    if words[0] == "use":
        if len(words) == 3 and words[1] in ("schema", "database"):
            state.project = dataclasses.replace(state.project, schema=unquoted(toks[2]))
            return
        if len(words) == 3 and words[1] == "catalog":
            return
        raise PipelineError(f"{where}: {written!r} is not mapped; write USE SCHEMA name or USE CATALOG name")
    if words[:3] == ["apply", "changes", "into"]:  # Lakeflow's older AUTO CDC: a flow named after its table
        _register_change_flow(registry, text, toks, where, state)
        return
    if words[0] != "create":
        raise PipelineError(f"{where}: {written!r} is not a statement a pipeline's SQL file may hold; write CREATE "
                            "STREAMING TABLE, CREATE MATERIALIZED VIEW or CREATE TEMPORARY VIEW ... AS query")
    at = 3 if words[1:3] in (["or", "refresh"], ["or", "replace"]) else 1
    modifiers = []
    while at < len(words) and words[at] in _MODIFIERS:
        modifiers.append(words[at])
        at += 1
    what = words[at] if at < len(words) else ""
    construct = " ".join(["CREATE", *[m.upper() for m in modifiers], what.upper()])
    if what == "flow" and at == 1:
        _register_flow(registry, text, toks, words, where, state)
        return
    if what == "sink":
        raise PipelineError(f"{where}: {construct} writes outside the lakehouse, which the asset graph does not "
                            "map; keep the pipeline's tables here and export from one of them")
    kind = _kind(set(modifiers), what)
    if kind is None:
        raise PipelineError(f"{where}: {construct} is not a dataset the asset graph maps; write CREATE STREAMING "
                            "TABLE, CREATE MATERIALIZED VIEW or CREATE TEMPORARY VIEW")
    _register_dataset(registry, text, toks, at + 1, kind, where, state)


def _register_flow(registry: PipelineRegistry, text: str, toks: list[Token], words: list[str],
                   where: SourceLocation, state: _FileState) -> None:
    """``CREATE FLOW name AS INSERT INTO table BY NAME query`` (an append flow: its own query and
    checkpoint) or ``CREATE FLOW name AS AUTO CDC INTO table FROM STREAM(changes) KEYS ...``."""
    shape = ("CREATE FLOW name AS INSERT INTO table BY NAME query, or CREATE FLOW name AS AUTO CDC INTO table "
             "FROM STREAM(changes) KEYS (...) SEQUENCE BY column ...")
    if len(toks) < 6 or toks[2].name is None or words[3] != "as":
        raise PipelineError(f"{where}: a flow is written {shape}")
    if words[4:7] == ["auto", "cdc", "into"]:
        _register_change_flow(registry, text, toks, where, state)
        return
    if words[4:6] != ["insert", "into"]:
        raise PipelineError(f"{where}: CREATE FLOW {toks[2].text} AS {' '.join(words[4:6]).upper()} is not mapped; "
                            f"a flow is written {shape}")
    if len(words) > 6 and words[6] == "once":
        raise PipelineError(f"{where}: INSERT INTO ONCE (a backfill run once) is not mapped; a flow here runs "
                            "incrementally on every update")
    target, at = _dataset_name(toks, 6, where)
    if words[at:at + 2] != ["by", "name"] or at + 2 >= len(toks):
        raise PipelineError(f"{where}: the flow {toks[2].text} must insert BY NAME, then its query: {shape}")
    location = SourceCodeLocation(str(where.file), where.line)
    query = sql_flow(text, state.project, where.file, toks[at + 2].start, toks[-1].end)
    registry.register_flow(Flow(name=str(toks[2].name), target=state.project.qualified(target, where),
                                spark_conf=dict(state.spark_conf), source_code_location=location, func=query))


def _register_change_flow(registry: PipelineRegistry, text: str, toks: list[Token], where: SourceLocation,
                          state: _FileState) -> None:
    """``CREATE FLOW name AS AUTO CDC INTO ...`` or ``APPLY CHANGES INTO ...``: the project's AUTO CDC."""
    def name_at(statement: list[Token], at: int, source: str) -> tuple[str, int]:
        name, after = _dataset_name(statement, at, where)
        return state.project.qualified(name, where), after
    try:
        flow, target, changes, spec = parse_auto_cdc_flow(toks, text, str(where), name_at)
    except SqlDefinitionError as exc:
        raise PipelineError(str(exc).replace("An AUTO CDC table is written", "A flow is written")) from exc
    registry.register_change_flow(flow, target, changes, spec, where, change_feed)


def _kind(modifiers: set[str], what: str) -> type[Output] | None:
    # Legacy TEMPORARY tables were kept out of the catalog but still stored: stored here.
    if what == "table" and modifiers <= {"streaming", "live", "private", "temporary"}:
        return StreamingTable if "streaming" in modifiers else MaterializedView if "live" in modifiers else None
    if what == "view" and modifiers in ({"materialized"}, {"materialized", "private"}):
        return MaterializedView
    # Legacy STREAMING LIVE VIEW: a temporary view read as a stream.
    if what == "view" and modifiers and modifiers <= {"temporary", "temp", "live", "streaming"}:
        return TemporaryView
    return None


def _register_dataset(registry: PipelineRegistry, text: str, toks: list[Token], at: int, kind: type[Output],
                      where: SourceLocation, state: _FileState) -> None:
    name, at = _dataset_name(toks, at, where)
    table = state.project.qualified(name, where)
    source = str(where)
    try:
        constraints, columns, clauses, at = table_elements(table, toks, at, source, text, typed_columns=True)
    except SqlDefinitionError as exc:
        raise PipelineError(str(exc)) from exc
    word = toks[at].text.lower() if at < len(toks) else ""
    if word in _UNMAPPED_CLAUSES:
        raise PipelineError(f"{where}: {table}: {_UNMAPPED_CLAUSES[word]} is not mapped; remove it to run the "
                            "pipeline here")
    location = SourceCodeLocation(str(where.file), where.line)
    schema = StructType([StructField(c.name, spark_type(c.type), True, {"comment": c.comment} if c.comment else {})
                         for c in columns]) if columns else None
    output: Output
    if kind is TemporaryView:
        output = TemporaryView(name=table, comment=clauses.comment, source_code_location=location)
    else:
        output = kind(name=table, comment=clauses.comment, source_code_location=location,  # type: ignore[call-arg]
                      table_properties=dict(clauses.properties), partition_cols=list(clauses.partitioned_by) or None,
                      cluster_by=list(clauses.clustered_by) or None, schema=schema, format=None)
    if kind is StreamingTable and at == len(toks) and not constraints:
        registry.register_output(output)  # declared for flows into it (CREATE FLOW)
        return
    if word != "as":
        found = f"found {toks[at].text!r}" if at < len(toks) else "the statement ends"
        raise PipelineError(f"{where}: {table}: AS and its query must follow its name, columns, COMMENT, "
                            f"TBLPROPERTIES, PARTITIONED BY and CLUSTER BY ({found})")
    if at + 1 >= len(toks):
        raise PipelineError(f"{where}: {table}: AS is followed by no query")
    if kind is TemporaryView and (columns or constraints or clauses != TableClauses(clauses.comment)):
        raise PipelineError(f"{where}: the temporary view {table} declares columns, expectations, properties or "
                            "a layout, which a view inlined into its readers does not keep; declare them on a table")
    flow = sql_flow(text, state.project, where.file, toks[at + 1].start, toks[-1].end)
    if kind is MaterializedView and any(read.streamed for read in flow.reads.tables):
        streams = ", ".join(f"STREAM({read.table})" for read in flow.reads.tables if read.streamed)
        raise PipelineError(f"{where}: the materialized view {table} reads {streams}; a materialized view reads "
                            "its sources as they stand: drop STREAM, or make it a STREAMING TABLE")
    setattr(flow, EXPECTATIONS_ATTRIBUTE, list(constraints))
    registry.register_output(output)
    registry.register_flow(Flow(name=table, target=table, spark_conf=dict(state.spark_conf),
                                source_code_location=location, func=flow))


def _dataset_name(toks: list[Token], at: int, where: SourceLocation) -> tuple[str, int]:
    """The dataset's name (one to three parts) at token ``at``, and the index of the token after it."""
    parts: list[str] = []
    while at < len(toks) and toks[at].name is not None:
        parts.append(toks[at].text)
        at += 1
        if at < len(toks) and toks[at].text == ".":
            at += 1
            continue
        break
    if not parts or len(parts) > 3:
        raise PipelineError(f"{where}: the dataset's name must follow CREATE ... TABLE / VIEW: name, schema.name "
                            "or catalog.schema.name")
    return ".".join(parts), at
