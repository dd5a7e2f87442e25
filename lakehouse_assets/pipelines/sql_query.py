"""A pipeline's SQL query as a flow: what it reads, found when the pipeline loads, and the
query run in a run's session when its table is materialized.

Lakeflow SQL names datasets as the pipeline does (``name``, ``schema.name``,
``catalog.schema.name``, ``LIVE.name``) and reads landed files with ``read_files``, which
Spark's SQL does not know; so the query runs as written, with its references replaced:

- a table (after ``FROM`` or ``JOIN``, ``STREAM(x)`` or ``STREAM x``) by its name in Spark's
  catalog, ```schema`.`name``` (in ``STREAM(...)`` when streamed);
- a temporary view of the pipeline by its DataFrame, inlined as a Python flow's is;
- ``STREAM read_files(path, format => ..., ...)`` by the lakehouse's Auto Loader reading the
  landing folder ``path``, as ``cloudFiles`` in Python (its schema stored, each file once);
  ``read_files`` without ``STREAM`` by a plain batch read of the folder's files; Lakeflow's
  older ``cloud_files(path, format, map('key', 'value', ...))`` is the Auto Loader stream too.

The tables are found by sqlglot in the query with its ``STREAM ...`` and ``read_files(...)``
masked by names of the same length, so every position still points into the file. What the
asset graph cannot run (a function only Databricks has) stops the load, naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot
from pyspark.sql import DataFrame
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lakehouse_assets.pipelines.landing_paths import auto_loader_defaults
from lakehouse_assets.pipelines.reads import FILE_FORMATS, FileRead, FlowReads, TableRead
from lakehouse_assets.pipelines.session import PipelineRun, active_run
from lakehouse_assets.pipelines.spec import PipelineError, PipelineProject, SourceLocation
from lakehouse_assets.tables.sql_definition import closing_parenthesis, split_commas, unquoted
from lakehouse_assets.tables.sql_refs import Token

READ_FILES = "read_files"
#: Lakeflow's older Auto Loader in SQL: ``cloud_files(path, format[, map(key, value, ...)])``, a stream.
CLOUD_FILES = "cloud_files"
#: Functions only Databricks has, each with what to do instead.
DATABRICKS_ONLY = {
    "read_kafka": "land the records as files and read them with STREAM read_files(...)",
    "read_kinesis": "land the records as files and read them with STREAM read_files(...)",
    "read_pubsub": "land the records as files and read them with STREAM read_files(...)",
    "read_pulsar": "land the records as files and read them with STREAM read_files(...)",
    "read_statestore": "read the state another way, or drop the query",
    "secret": "pass the value through the pipeline's configuration (${key})",
    "try_secret": "pass the value through the pipeline's configuration (${key})",
    "vector_search": "compute it in a Python flow",
    "http_request": "fetch the data outside the pipeline and land it as files",
}
_AI_FUNCTION = re.compile(r"ai_[a-z_]+")


@dataclass(frozen=True)
class _Reference:
    """A span of the file's text (``start`` to ``end``) the run replaces: a table read, or
    files read (``files``)."""

    start: int
    end: int
    location: SourceLocation
    table: str | None = None
    streamed: bool = False
    files: FileRead | None = None


class SqlFlow:
    """A SQL query filling a dataset: called in a run, the query's DataFrame; ``reads``, what it
    reads, known since the pipeline loaded (:func:`~.reads.flow_reads` takes them as they are)."""

    def __init__(self, text: str, start: int, end: int, references: Sequence[_Reference],
                 location: SourceLocation) -> None:
        self.__doc__ = None  # a dataset's description is its COMMENT
        self._text, self._start, self._end = text, start, end
        self._references = tuple(references)
        self.location = location
        self.reads = FlowReads(tuple(TableRead(r.table, r.streamed, r.location) for r in references if r.table),
                               tuple(r.files for r in references if r.files))

    def __call__(self) -> DataFrame:
        run = active_run(f"the query at {self.location}")
        frames: dict[str, DataFrame] = {}
        inlined = any(r.files or r.table in run.views for r in self._references)
        parts, at = [], self._start
        for i, ref in enumerate(self._references):
            parts.append(_escaped(self._text[at:ref.start], inlined))
            at = ref.end
            key = f"lakehouse_read_{i}"
            if ref.files is not None:
                frames[key] = _files_frame(run, ref.files)
            elif ref.table in run.views:
                frames[key] = run.session.read_dataset(str(ref.table), ref.streamed)
            else:
                name = ".".join(f"`{part}`" for part in str(ref.table).split("."))
                parts.append(f"STREAM({name})" if ref.streamed else name)
                continue
            parts.append(f" {{{key}}} ")
        parts.append(_escaped(self._text[at:self._end], inlined))
        frame: DataFrame = run.spark.sql("".join(parts), args=None, **frames)
        return frame


def _escaped(part: str, inlined: bool) -> str:
    """With DataFrames to inline, pyspark formats the query (``{name}`` is a DataFrame): its
    own braces are escaped."""
    return part.replace("{", "{{").replace("}", "}}") if inlined else part


def _files_frame(run: PipelineRun, read: FileRead) -> DataFrame:
    """``read_files``: with ``STREAM``, the lakehouse's Auto Loader; else a batch read."""
    options = {k: v for k, v in read.options.items() if k.lower() != "schema"}
    schema = next((v for k, v in read.options.items() if k.lower() == "schema"), None)
    if read.cloud_files:
        return run.session.auto_loader(read.path, read.format, options, schema)
    if options.get("inferColumnTypes", "").lower() == "true":
        options["inferSchema"] = "true"  # Spark's name for it, in a batch read
    reader = run.spark.read.format(read.format).options(**options)
    frame: DataFrame = (reader.schema(schema) if schema else reader).load(run.session.landed(read.path))
    return frame


def sql_flow(text: str, toks: Sequence[Token], project: PipelineProject, file: Path) -> SqlFlow:
    """The flow of the query ``toks`` (tokens of the file ``file``'s ``text``; the query runs
    from the first to the last) in ``project``."""
    def where(tok: Token) -> SourceLocation:
        return SourceLocation(file, text.count("\n", 0, tok.start) + 1)

    toks = list(toks)
    _refuse_databricks_functions(toks, where)
    references = [*_stream_and_files(text, toks, project, where)]
    start, end = toks[0].start, toks[-1].end
    masked = list(text[start:end])
    for i, ref in enumerate(references):
        placeholder = f"_m{i}"
        masked[ref.start - start:ref.end - start] = placeholder.ljust(ref.end - ref.start)
    tables = [ref for ref in _tables(text, "".join(masked), start, project, file, where(toks[0]))
              if not any(span.start <= ref.start < span.end for span in references)]
    return SqlFlow(text, start, end, sorted([*references, *tables], key=lambda r: r.start), where(toks[0]))


def _refuse_databricks_functions(toks: list[Token], where: Any) -> None:
    for i, tok in enumerate(toks[:-1]):
        name = (tok.name or "").lower() if tok.kind == "word" else ""
        if not name or toks[i + 1].text != "(" or (i and toks[i - 1].text == "."):
            continue
        if name in DATABRICKS_ONLY or _AI_FUNCTION.fullmatch(name):
            instead = DATABRICKS_ONLY.get(name, "compute it in a Python flow or outside the pipeline")
            raise PipelineError(f"{where(tok)}: {tok.text}(...) is a Databricks-only function the asset graph "
                                f"cannot run; {instead}")


def _stream_and_files(text: str, toks: list[Token], project: PipelineProject, where: Any) -> list[_Reference]:
    """``STREAM(name)``, ``STREAM name``, ``[STREAM] read_files(...)`` and ``STREAM(read_files(...))``."""
    found: list[_Reference] = []
    claimed: set[int] = set()
    for i, tok in enumerate(toks):
        follows_from = i > 0 and _word(toks[i - 1], "from", "join")
        if _word(tok, "stream") and follows_from:
            parenthesised = i + 1 < len(toks) and toks[i + 1].text == "("
            at = i + 2 if parenthesised else i + 1
            if at < len(toks) and _word(toks[at], READ_FILES, CLOUD_FILES):
                files, last = _files_call(text, toks, at, True, where)
            else:
                name, last = _name(toks, at)
                if name is None:
                    raise PipelineError(f"{where(tok)}: STREAM must be followed by a table's name or read_files(...)")
                files = None
            if parenthesised:
                last += 1
                if last >= len(toks) or toks[last].text != ")":
                    raise PipelineError(f"{where(tok)}: STREAM( is not closed after what it reads")
            claimed.add(at)
            table = None if files else project.qualified(str(name), where(tok))
            found.append(_Reference(tok.start, toks[last].end, where(tok), table, True, files))
        elif _word(tok, READ_FILES, CLOUD_FILES) and i + 1 < len(toks) and toks[i + 1].text == "(" \
                and i not in claimed:
            if not follows_from:
                raise PipelineError(f"{where(tok)}: {tok.text}(...) is read after FROM or JOIN (STREAM read_files "
                                    "for a stream), as a table")
            files, last = _files_call(text, toks, i, _word(tok, CLOUD_FILES), where)
            found.append(_Reference(tok.start, toks[last].end, where(tok), files=files))
    return found


def _files_call(text: str, toks: list[Token], at: int, streamed: bool, where: Any) -> tuple[FileRead, int]:
    """``read_files('path', key => value, ...)`` or ``cloud_files('path', 'format', map(...))``
    at token ``at``, and the index of its ``)``."""
    function = toks[at].text
    close = closing_parenthesis(toks, at + 1) if at + 1 < len(toks) and toks[at + 1].text == "(" else None
    if close is None:
        raise PipelineError(f"{where(toks[at])}: {function}( is never closed")
    arguments = split_commas(toks[at + 2:close])
    if not arguments or len(arguments[0]) != 1 or arguments[0][0].kind != "string":
        raise PipelineError(f"{where(toks[at])}: {function} takes the files' path first, as a quoted string")
    options = _cloud_files_options(text, arguments, where) if _word(toks[at], CLOUD_FILES) \
        else _named_options(text, arguments, where)
    fmt = next((v for k, v in options.items() if k.lower() == "format"), "").lower()
    if fmt not in FILE_FORMATS:
        raise PipelineError(f"{where(toks[at])}: {function} reads format {fmt or 'not given'}; give format => "
                            f"{', '.join(repr(f) for f in FILE_FORMATS)}")
    rest = auto_loader_defaults(fmt, {k: v for k, v in options.items() if k.lower() != "format"},
                                read_files=not _word(toks[at], CLOUD_FILES))
    return FileRead(unquoted(arguments[0][0]), fmt, streamed, streamed, rest, where(toks[at])), close


def _named_options(text: str, arguments: list[list[Token]], where: Any) -> dict[str, str]:
    """``read_files``' options after its path: ``name => value``."""
    options: dict[str, str] = {}
    for argument in arguments[1:]:
        if (len(argument) != 4 or argument[0].name is None or argument[1].text != "=" or argument[2].text != ">"
                or argument[3].kind not in ("string", "number", "word")):
            written = text[argument[0].start:argument[-1].end]
            raise PipelineError(f"{where(argument[0])}: read_files takes options as name => 'value' (found "
                                f"{written!r})")
        value = argument[3]
        options[str(argument[0].name)] = unquoted(value) if value.kind == "string" else value.text.lower()
    return options


def _cloud_files_options(text: str, arguments: list[list[Token]], where: Any) -> dict[str, str]:
    """``cloud_files``' arguments after its path: the format, then ``map('key', 'value', ...)``."""
    if len(arguments) < 2 or len(arguments[1]) != 1 or arguments[1][0].kind != "string":
        raise PipelineError(f"{where(arguments[0][0])}: cloud_files takes the files' format second, as a quoted "
                            "string")
    options = {"format": unquoted(arguments[1][0])}
    if len(arguments) == 2:
        return options
    given = arguments[2]
    pairs = split_commas(given[2:-1]) if len(arguments) == 3 and len(given) > 3 and _word(given[0], "map") \
        and given[1].text == "(" and given[-1].text == ")" else []
    if not pairs or len(pairs) % 2 or any(len(p) != 1 or p[0].kind != "string" for p in pairs):
        written = text[given[0].start:arguments[-1][-1].end]
        raise PipelineError(f"{where(given[0])}: cloud_files takes its options as map('key', 'value', ...) (found "
                            f"{written!r})")
    options.update({unquoted(k[0]): unquoted(v[0]) for k, v in zip(pairs[::2], pairs[1::2], strict=True)})
    return options


def _name(toks: list[Token], at: int) -> tuple[str | None, int]:
    """The name of one to three parts at token ``at`` as written, and the index of its last token."""
    parts: list[str] = []
    i = at
    while i < len(toks) and toks[i].name is not None and len(parts) < 3:
        parts.append(toks[i].text)
        if i + 2 < len(toks) and toks[i + 1].text == "." and toks[i + 2].name is not None:
            i += 2
            continue
        return ".".join(parts), i
    return None, at


def _tables(text: str, masked: str, start: int, project: PipelineProject, file: Path,
            where: SourceLocation) -> list[_Reference]:
    """The tables sqlglot finds in the query (``masked``, from ``start`` in the file's
    ``text``), but a WITH's names."""
    try:
        tree = sqlglot.parse_one(masked, dialect="spark")
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PipelineError(f"{where}: the query could not be read to find the tables it reads ({first}); write "
                            "it in Spark SQL") from exc
    ctes = {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    found = []
    for table in tree.find_all(exp.Table):
        parts = table.parts
        if not isinstance(table.this, exp.Identifier) or not all("start" in p.meta for p in parts):
            continue  # a table-valued function (range(10)), or a masked span
        if len(parts) == 1 and table.name.lower() in ctes:
            continue
        begin, end = start + parts[0].meta["start"], start + parts[-1].meta["end"] + 1
        at = SourceLocation(file, text.count("\n", 0, begin) + 1)
        found.append(_Reference(begin, end, at, project.qualified(text[begin:end], at)))
    return found


def _word(tok: Token, *words: str) -> bool:
    return tok.kind == "word" and tok.text.lower() in words
