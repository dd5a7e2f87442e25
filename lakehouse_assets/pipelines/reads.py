"""What a pipeline's Python flow reads (datasets and landed files), found in its source
without running it: the asset's upstream, known when the definitions load, with no Spark job.
A name or path is evaluated over the file's own values (constants, ``os.environ``, the spec's
configuration, the function's simple assignments); what the graph cannot map stops the load,
naming the file and the line.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from lakehouse_assets.pipelines.landing_paths import auto_loader_defaults
from lakehouse_assets.pipelines.python_api import DATABRICKS_GLOBALS, LAKEFLOW
from lakehouse_assets.pipelines.session import CLOUD_FILES, PipelineSession
from lakehouse_assets.pipelines.spec import PipelineError, PipelineProject, SourceLocation

#: File formats a flow may read, as a landing folder.
FILE_FORMATS = ("json", "csv", "parquet")
_READERS = {"read": False, "readStream": True}
_DATASET_READS = {"read": False, "read_stream": True}
# How deep a flow's calls to its file's own functions are followed.
_MAX_HELPER_DEPTH = 3
_UNMAPPED_CALLS = {"writeStream": "writes a stream itself", "foreachBatch": "writes each batch itself",
                   "saveAsTable": "writes a table itself", "insertInto": "writes a table itself"}


@dataclass(frozen=True)
class TableRead:
    """A dataset or table a flow reads, as ``schema.name``; ``streamed`` when as a stream."""

    table: str
    streamed: bool
    location: SourceLocation


@dataclass(frozen=True)
class FileRead:
    """Files a flow reads at ``path``: with Auto Loader (``cloud_files``), as a plain file
    stream, or in batch; ``options`` as given, with Databricks' defaults (:func:`auto_loader_defaults`)."""

    path: str
    format: str
    streamed: bool
    cloud_files: bool
    options: Mapping[str, str]
    location: SourceLocation


@dataclass(frozen=True)
class FlowReads:
    """Everything one flow reads."""

    tables: tuple[TableRead, ...]
    files: tuple[FileRead, ...]


@runtime_checkable
class DeclaredReads(Protocol):
    """A flow that says what it reads (a SQL file's query, whose reads were found as it loaded)."""

    @property
    def reads(self) -> FlowReads: ...


def flow_reads(func: Callable[..., Any], project: PipelineProject, arguments: Mapping[str, Any] | None = None,
               depth: int = 0) -> FlowReads:
    """What the flow ``func`` of ``project`` reads, with what the functions of its file it calls read."""
    if isinstance(func, DeclaredReads):
        return func.reads
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as exc:
        raise PipelineError(f"{getattr(func, '__qualname__', func)}: its source cannot be read ({exc}), so what it "
                            "reads cannot be known before it runs") from exc
    file = Path(inspect.getsourcefile(func) or "<unknown>")
    offset = func.__code__.co_firstlineno - 1
    tree = ast.parse(source)
    values = _values(func, tree, arguments or {})
    tables: list[TableRead] = []
    files: list[FileRead] = []
    for called in _helpers_called(tree, func, values, project, depth):
        tables.extend(called.tables)
        files.extend(called.files)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in DATABRICKS_GLOBALS and node.id not in values:
            raise PipelineError(f"{SourceLocation(file, node.lineno + offset)}: {node.id} is Databricks' own and has "
                                f"no counterpart here: {DATABRICKS_GLOBALS[node.id]}")
    for node in ast.walk(tree):
        where = SourceLocation(file, getattr(node, "lineno", 0) + offset)
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr in _UNMAPPED_CALLS:
            raise PipelineError(f"{where}: the flow {_UNMAPPED_CALLS[node.func.attr]} ({node.func.attr}); a flow "
                                "returns its DataFrame and the asset graph writes it")
        chain = _chain(node)
        if chain is None:
            continue
        root, calls = chain
        bound = values.get(root)
        if bound is LAKEFLOW and len(calls) == 1 and calls[0][0] in _DATASET_READS and calls[0][1] is not None:
            name = _argument(calls[0][1], 0, "name", values, where)
            tables.append(TableRead(project.qualified(str(name), where), _DATASET_READS[calls[0][0]], where))
            continue
        if not isinstance(bound, PipelineSession) or not calls:
            continue
        if calls[0][0] == "table" and len(calls) == 1:
            tables.append(TableRead(project.qualified(str(_argument(node, 0, "tableName", values, where)), where),
                                    False, where))
            continue
        if calls[0][0] == "sql" and len(calls) == 1:
            query = _sql_flow(str(_argument(node, 0, "sqlQuery", values, where)), project, where)
            tables.extend(query.reads.tables)
            files.extend(query.reads.files)
            continue
        if calls[0][0] not in _READERS or calls[0][1] is not None:
            continue
        read = _reader_call(calls, values, where, project)
        if isinstance(read, TableRead):
            tables.append(read)
        elif read is not None:
            files.append(read)
    return FlowReads(_distinct(tables), _distinct(files))


Read = TypeVar("Read", TableRead, FileRead)


def _distinct(reads: list[Read]) -> tuple[Read, ...]:
    """``reads`` without repeats: the walk meets a read again in each call chained after it."""
    return tuple({repr(read): read for read in reads}.values())


def _helpers_called(tree: ast.Module, func: Callable[..., Any], values: Mapping[str, Any], project: PipelineProject,
                    depth: int) -> list[FlowReads]:
    """What the functions of the flow's own file that it calls read (a reader built in a helper)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        helper = values.get(node.func.id)
        if (not inspect.isfunction(helper) or helper is func or depth >= _MAX_HELPER_DEPTH
                or helper.__module__ != func.__module__):
            continue
        try:
            bound = inspect.signature(helper).bind(
                *[_value_of(a, values) for a in node.args],
                **{kw.arg: _value_of(kw.value, values) for kw in node.keywords if kw.arg})
        except Exception:  # arguments known only when the flow runs: the helper's reads must not need them
            bound = None
        found.append(flow_reads(helper, project, bound.arguments if bound else {}, depth + 1))
    return found


def _sql_flow(query: str, project: PipelineProject, where: SourceLocation) -> Any:
    """``spark.sql(query)`` in a flow, read as a SQL file's query is."""
    from lakehouse_assets.pipelines.sql_query import sql_flow  # the SQL flows build on this module's reads

    if not query.strip():
        raise PipelineError(f"{where}: spark.sql is given no query")
    return sql_flow(query, project, where.file)


def _reader_call(calls: list[tuple[str, ast.Call | None]], values: Mapping[str, Any], where: SourceLocation,
                 project: PipelineProject) -> TableRead | FileRead | None:
    """``spark.read...`` / ``spark.readStream...`` up to the call saying what is read."""
    streamed = _READERS[calls[0][0]]
    source_format: str | None = None
    options: dict[str, str] = {}
    for method, call in calls[1:]:
        if call is None:
            return None
        if method == "format":
            source_format = str(_argument(call, 0, "source", values, where))
            if source_format.lower() not in (CLOUD_FILES, *FILE_FORMATS):
                raise PipelineError(
                    f"{where}: the flow reads format {source_format!r}, which the asset graph does not map: land "
                    "the data as files (json, csv, parquet) and read them with cloudFiles, or read a lakehouse table")
        elif method == "option":
            options[str(_argument(call, 0, "key", values, where))] = _option(call.args[1:2] or [
                kw.value for kw in call.keywords if kw.arg == "value"], values)
        elif method == "options":
            options.update({kw.arg: _option([kw.value], values) for kw in call.keywords if kw.arg})
        elif method == "table":
            name = str(_argument(call, 0, "tableName", values, where))
            return TableRead(project.qualified(name, where), streamed, where)
        elif method == "load" or method in FILE_FORMATS:
            path = str(_argument(call, 0, "path", values, where))
            fmt = method if method in FILE_FORMATS else (source_format or "")
            cloud_files = fmt.lower() == CLOUD_FILES
            if cloud_files:
                fmt = options.get("cloudFiles.format", "")
            if fmt not in FILE_FORMATS:
                raise PipelineError(f"{where}: the flow reads {path} as {fmt or 'an unnamed format'}; read json, csv "
                                    "or parquet (cloudFiles.format for Auto Loader)")
            options.update({kw.arg: str(_evaluate(kw.value, values, where)) for kw in call.keywords if kw.arg})
            return FileRead(path, fmt, streamed, cloud_files,
                            auto_loader_defaults(fmt, options) if cloud_files else options, where)
    return None


def _chain(node: ast.Call) -> tuple[str, list[tuple[str, ast.Call | None]]] | None:
    """``root.a(...).b.c(...)`` as ``("root", [("a", call), ("b", None), ("c", call)])``."""
    calls: list[tuple[str, ast.Call | None]] = []
    current: ast.expr = node
    while True:
        if isinstance(current, ast.Call) and isinstance(current.func, ast.Attribute):
            calls.append((current.func.attr, current))
            current = current.func.value
        elif isinstance(current, ast.Attribute):
            calls.append((current.attr, None))
            current = current.value
        elif isinstance(current, ast.Name):
            return current.id, list(reversed(calls))
        else:
            return None


def _argument(call: ast.Call, position: int, keyword: str, values: Mapping[str, Any], where: SourceLocation) -> Any:
    node = next((kw.value for kw in call.keywords if kw.arg == keyword), None)
    if node is None and len(call.args) > position:
        node = call.args[position]
    if node is None:
        raise PipelineError(f"{where}: the call gives no {keyword}")
    return _evaluate(node, values, where)


def _option(nodes: list[ast.expr], values: Mapping[str, Any]) -> str:
    """A reader option's value as text, or ``?`` when known only as the flow runs (say how, not what, it reads)."""
    try:
        return str(_value_of(nodes[0], values))
    except Exception:  # noqa: BLE001 - any value the flow computes itself
        return "?"


def _value_of(node: ast.expr, values: Mapping[str, Any]) -> Any:
    """``node`` evaluated over the flow's known ``values`` (the file's own code, run as its import ran it)."""
    return eval(compile(ast.Expression(node), "<pipeline>", "eval"), dict(values))  # noqa: S307


def _evaluate(node: ast.expr, values: Mapping[str, Any], where: SourceLocation) -> Any:
    try:
        return _value_of(node, values)
    except PipelineError:
        raise
    except Exception as exc:
        raise PipelineError(
            f"{where}: {ast.unparse(node)} cannot be known before the flow runs ({type(exc).__name__}: {exc}); "
            "write it with the file's constants, os.environ or spark.conf.get of the pipeline's configuration, so "
            "that what the flow reads is known when the pipeline loads") from exc


def _values(func: Callable[..., Any], tree: ast.Module, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The names a flow's arguments may use: the file's globals, the function's closure, the
    ``arguments`` it is called with (a helper's), and its simple assignments that evaluate now."""
    values: dict[str, Any] = dict(func.__globals__)
    closure = func.__closure__ or ()
    for name, cell in zip(func.__code__.co_freevars, closure, strict=True):
        try:
            values[name] = cell.cell_contents
        except ValueError:
            continue
    values.update(arguments)
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.FunctionDef) else []
    for statement in body:
        if isinstance(statement, ast.Assign) and all(isinstance(t, ast.Name) for t in statement.targets):
            try:
                value = _value_of(statement.value, values)
            except Exception:  # a value known only when the flow runs: not a name or path
                continue
            values.update({target.id: value for target in statement.targets if isinstance(target, ast.Name)})
    return values
