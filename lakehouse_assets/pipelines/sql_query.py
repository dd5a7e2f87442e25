"""A pipeline's SQL query as a flow: what it reads, found by sqlglot when the pipeline loads
(:func:`~lakehouse_assets.tables.sql_refs.references`), and the query run as written when its
table is materialized, with its references replaced, as Spark's SQL knows neither the
pipeline's names nor ``read_files``: a table by its catalog name, a temporary view by its
DataFrame, ``[STREAM] read_files`` / ``cloud_files`` by the lakehouse's Auto Loader or a batch read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lakehouse_assets.pipelines.landing_paths import auto_loader_defaults
from lakehouse_assets.pipelines.reads import FILE_FORMATS, FileRead, FlowReads, TableRead
from lakehouse_assets.pipelines.session import PipelineRun, active_run
from lakehouse_assets.pipelines.spec import PipelineError, PipelineProject, SourceLocation
from lakehouse_assets.tables.sql_refs import FILE_READERS, Reference, references, tokens

#: Lakeflow's older Auto Loader in SQL: ``cloud_files(path, format[, map(key, value, ...)])``, a stream.
CLOUD_FILES = "cloud_files"
#: Functions only Databricks has, each with what to do instead.
DATABRICKS_ONLY = {
    **dict.fromkeys(("read_kafka", "read_kinesis", "read_pubsub", "read_pulsar"),
                    "land the records as files and read them with STREAM read_files(...)"),
    **dict.fromkeys(("secret", "try_secret"), "pass the value through the pipeline's configuration (${key})"),
    "read_statestore": "read the state another way, or drop the query",
    "vector_search": "compute it in a Python flow",
    "http_request": "fetch the data outside the pipeline and land it as files",
}
_AI_FUNCTION = re.compile(r"ai_[a-z_]+")


@dataclass(frozen=True)
class _Reference:
    """A span of the file's text the run replaces: a table read, or files read (``files``)."""

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
    """With DataFrames to inline, pyspark formats the query (``{name}``): its own braces are escaped."""
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


def sql_flow(text: str, project: PipelineProject, file: Path, start: int = 0, end: int | None = None) -> SqlFlow:
    """The flow of the query ``text[start:end]`` (``text`` the file ``file``'s) in ``project``."""
    def where(at: int) -> SourceLocation:
        return SourceLocation(file, text.count("\n", 0, at) + 1)

    end = len(text) if end is None else end
    _refuse_databricks_functions(text, start, end, where)
    try:
        found = references(text[start:end])
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PipelineError(f"{where(start)}: the query could not be read to find the tables it reads ({first}); "
                            "write it in Spark SQL") from exc
    return SqlFlow(text, start, end, [_reference(ref, start, project, where) for ref in found], where(start))


def _reference(ref: Reference, offset: int, project: PipelineProject, where: Any) -> _Reference:
    """A reference of the query at ``offset`` in the file: a table by its pipeline name, or files read."""
    at = where(offset + ref.start)
    if ref.files is None:
        return _Reference(offset + ref.start, offset + ref.end, at, project.qualified(ref.written, at), ref.streamed)
    return _Reference(offset + ref.start, offset + ref.end, at, files=_files_read(ref.files, ref.streamed, at))


def _refuse_databricks_functions(text: str, start: int, end: int, where: Any) -> None:
    toks = [replace(tok, start=start + tok.start) for tok in tokens(text[start:end])]
    for i, tok in enumerate(toks[:-1]):
        name = (tok.name or "").lower() if tok.kind == "word" else ""
        if not name or toks[i + 1].text != "(" or (i and toks[i - 1].text == "."):
            continue
        if name in DATABRICKS_ONLY or _AI_FUNCTION.fullmatch(name):
            instead = DATABRICKS_ONLY.get(name, "compute it in a Python flow or outside the pipeline")
            raise PipelineError(f"{where(tok.start)}: {tok.text}(...) is a Databricks-only function the asset graph "
                                f"cannot run; {instead}")
        before = [t.text.lower() for t in toks[max(i - 2, 0):i]]
        if name in FILE_READERS and not (before[-1:] in (["from"], ["join"], ["stream"]) or before == ["stream", "("]):
            raise PipelineError(f"{where(tok.start)}: {tok.text}(...) is read after FROM or JOIN (STREAM read_files "
                                "for a stream), as a table")


def _files_read(call: exp.Anonymous, streamed: bool, where: SourceLocation) -> FileRead:
    """``read_files('path', key => value, ...)`` or ``cloud_files('path', 'format', map(...))``."""
    function, cloud_files = call.name, call.name.lower() == CLOUD_FILES
    path, *arguments = call.expressions or [None]
    if not isinstance(path, exp.Literal) or not path.is_string:
        raise PipelineError(f"{where}: {function} takes the files' path first, as a quoted string")
    options = _cloud_files_options(arguments, where) if cloud_files else _named_options(arguments, where)
    fmt = next((v for k, v in options.items() if k.lower() == "format"), "").lower()
    if fmt not in FILE_FORMATS:
        raise PipelineError(f"{where}: {function} reads format {fmt or 'not given'}; give format => "
                            f"{', '.join(repr(f) for f in FILE_FORMATS)}")
    rest = auto_loader_defaults(fmt, {k: v for k, v in options.items() if k.lower() != "format"},
                                read_files=not cloud_files)
    streamed = streamed or cloud_files
    return FileRead(path.name, fmt, streamed, streamed, rest, where)


def _named_options(arguments: list[exp.Expression], where: SourceLocation) -> dict[str, str]:
    """``read_files``' options after its path: ``name => value``."""
    options: dict[str, str] = {}
    for argument in arguments:
        value = argument.expression if isinstance(argument, exp.Kwarg) else None
        if not isinstance(value, exp.Literal | exp.Boolean | exp.Column):
            raise PipelineError(f"{where}: read_files takes options as name => 'value' (found "
                                f"{argument.sql(dialect='databricks')!r})")
        options[argument.this.name] = value.name if isinstance(value, exp.Literal) and value.is_string \
            else value.sql().lower()
    return options


def _cloud_files_options(arguments: list[exp.Expression], where: SourceLocation) -> dict[str, str]:
    """``cloud_files``' arguments after its path: the format, then ``map('key', 'value', ...)``."""
    if not arguments or not isinstance(arguments[0], exp.Literal) or not arguments[0].is_string:
        raise PipelineError(f"{where}: cloud_files takes the files' format second, as a quoted string")
    options = {"format": arguments[0].name}
    if len(arguments) == 1:
        return options
    given = arguments[1]
    pairs = [*given.args["keys"].expressions, *given.args["values"].expressions] \
        if len(arguments) == 2 and isinstance(given, exp.VarMap) else []
    if not pairs or any(not isinstance(p, exp.Literal) or not p.is_string for p in pairs):
        written = ", ".join(a.sql(dialect="databricks") for a in arguments[1:])
        raise PipelineError(f"{where}: cloud_files takes its options as map('key', 'value', ...) (found "
                            f"{written!r})")
    keys = given.args["keys"].expressions
    options.update({k.name: v.name for k, v in zip(keys, given.args["values"].expressions, strict=True)})
    return options
