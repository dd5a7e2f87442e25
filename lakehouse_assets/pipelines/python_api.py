"""Loading a pipeline's Python files unchanged: ``from pyspark import pipelines as dp``
(or Lakeflow's ``import dlt``) and its decorators, with Databricks' extensions; Columns built
at a file's top level are recorded and built when Spark needs them
(:mod:`~lakehouse_assets.pipelines.import_columns`).

While a file is imported, ``pyspark.pipelines`` and ``dlt`` are one module holding pyspark's
own API (``table``, ``materialized_view``, ``temporary_view``, ``create_streaming_table``,
``append_flow``, ...) and what Lakeflow adds: the expectations (``expect``,
``expect_or_drop``, ``expect_or_fail``, ``expect_all*``), ``read`` / ``read_stream``, and the
older names (``view``, ``create_target_table``, ``apply_changes``). Both names are put back
afterwards, so an installed package named ``dlt`` is shadowed only while a pipeline file is
imported. The file's own references keep the module, so its functions find ``dp.read`` when
they run.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pyspark
import pyspark.pipelines as sdp
from pyspark.pipelines.graph_element_registry import (
    get_active_graph_element_registry,
    graph_element_registration_context,
)

from lakehouse_assets.pipelines.auto_cdc import create_auto_cdc_flow, create_auto_cdc_from_snapshot_flow
from lakehouse_assets.pipelines.graph import EXPECTATIONS_ATTRIBUTE, Expectation, PipelineRegistry
from lakehouse_assets.pipelines.import_columns import deferred_columns
from lakehouse_assets.pipelines.session import PipelineSession, active_run
from lakehouse_assets.pipelines.spec import PipelineError
from lakehouse_assets.tables.sql_definition import OnViolation

_MODULE = "pyspark.pipelines"
# Databricks' notebook globals, and what to write instead.
_DATABRICKS_ONLY = {
    "dbutils": "list folders with pathlib or os, and pass settings through the pipeline's configuration "
               "(spark.conf.get)",
    "display": "leave displays out of pipeline files", "displayHTML": "leave displays out of pipeline files"}
_LEGACY_MODULE = "dlt"


def _expecting(on_violation: OnViolation, expectations: Mapping[str, str]) -> Callable[[Any], Any]:
    def decorate(func: Any) -> Any:
        if not callable(func):
            raise PipelineError(
                f"@expect... decorates a dataset's function: put it below @dp.table (it was given {func!r})")
        declared = [Expectation(name, condition, on_violation) for name, condition in expectations.items()]
        # Decorators apply from the bottom up: keep the order they are written in.
        setattr(func, EXPECTATIONS_ATTRIBUTE, [*declared, *getattr(func, EXPECTATIONS_ATTRIBUTE, [])])
        return func
    return decorate


def expect(name: str, condition: str) -> Callable[[Any], Any]:
    """Rows failing ``condition`` are kept, and counted."""
    return _expecting(OnViolation.warn, {name: condition})


def expect_or_drop(name: str, condition: str) -> Callable[[Any], Any]:
    """Rows failing ``condition`` go to the table's quarantine, with ``name`` as the reason."""
    return _expecting(OnViolation.drop_row, {name: condition})


def expect_or_fail(name: str, condition: str) -> Callable[[Any], Any]:
    """A row failing ``condition`` fails the update."""
    return _expecting(OnViolation.fail_update, {name: condition})


def expect_all(expectations: Mapping[str, str]) -> Callable[[Any], Any]:
    """:func:`expect` for each ``{name: condition}``."""
    return _expecting(OnViolation.warn, expectations)


def expect_all_or_drop(expectations: Mapping[str, str]) -> Callable[[Any], Any]:
    """:func:`expect_or_drop` for each ``{name: condition}``."""
    return _expecting(OnViolation.drop_row, expectations)


def expect_all_or_fail(expectations: Mapping[str, str]) -> Callable[[Any], Any]:
    """:func:`expect_or_fail` for each ``{name: condition}``."""
    return _expecting(OnViolation.fail_update, expectations)


def create_streaming_table(name: str, *args: Any, expect_all: Mapping[str, str] | None = None,
                           expect_all_or_drop: Mapping[str, str] | None = None,
                           expect_all_or_fail: Mapping[str, str] | None = None, **kwargs: Any) -> None:
    """pyspark's ``create_streaming_table``, with Lakeflow's expectations of the table
    (``expect_all``, ``expect_all_or_drop``, ``expect_all_or_fail``), as decorators give them."""
    sdp.create_streaming_table(name, *args, **kwargs)
    declared = [Expectation(rule, condition, on_violation) for on_violation, given in (
        (OnViolation.warn, expect_all), (OnViolation.drop_row, expect_all_or_drop),
        (OnViolation.fail_update, expect_all_or_fail)) for rule, condition in (given or {}).items()]
    registry = get_active_graph_element_registry()
    if declared and isinstance(registry, PipelineRegistry):
        registry.expect(name, declared)


def table(query_function: Any = None, *, temporary: bool = False, **kwargs: Any) -> Any:
    """pyspark's ``table``, taking Lakeflow's ``temporary`` (a table kept out of the catalog):
    a table of the pipeline's own here too."""
    return sdp.table(query_function, **kwargs)


def materialized_view(query_function: Any = None, *, temporary: bool = False, **kwargs: Any) -> Any:
    """pyspark's ``materialized_view``, taking Lakeflow's ``temporary``, as :func:`table`."""
    return sdp.materialized_view(query_function, **kwargs)


def read(name: str) -> Any:
    """Lakeflow's ``dlt.read(name)``: the dataset as it stands."""
    return active_run(f"read({name!r})").session.read_dataset(name, streaming=False)


def read_stream(name: str) -> Any:
    """Lakeflow's ``dlt.read_stream(name)``: the dataset as a stream."""
    return active_run(f"read_stream({name!r})").session.read_dataset(name, streaming=True)


def _lakeflow_module() -> ModuleType:
    module = ModuleType(_MODULE, sdp.__doc__)
    for name in sdp.__all__:
        setattr(module, name, getattr(sdp, name))
    extensions: dict[str, Any] = dict(
        expect=expect, expect_or_drop=expect_or_drop, expect_or_fail=expect_or_fail, expect_all=expect_all,
        expect_all_or_drop=expect_all_or_drop, expect_all_or_fail=expect_all_or_fail, read=read,
        read_stream=read_stream, create_streaming_table=create_streaming_table, table=table,
        materialized_view=materialized_view,
        create_auto_cdc_flow=create_auto_cdc_flow,
        create_auto_cdc_from_snapshot_flow=create_auto_cdc_from_snapshot_flow,
        # Lakeflow's older names.
        view=sdp.temporary_view, create_target_table=create_streaming_table,
        create_streaming_live_table=create_streaming_table,
        apply_changes=create_auto_cdc_flow, apply_changes_from_snapshot=create_auto_cdc_from_snapshot_flow)
    for name, value in extensions.items():
        setattr(module, name, value)
    module.__all__ = sorted({*sdp.__all__, *extensions})  # type: ignore[attr-defined]
    return module


LAKEFLOW = _lakeflow_module()


@contextmanager
def _lakeflow_names() -> Iterator[None]:
    """``pyspark.pipelines`` and ``dlt`` as :data:`LAKEFLOW` while a pipeline file is imported."""
    saved = {name: sys.modules.get(name) for name in (_MODULE, _LEGACY_MODULE)}
    sys.modules[_MODULE] = sys.modules[_LEGACY_MODULE] = LAKEFLOW
    pyspark.pipelines = LAKEFLOW  # `from pyspark import pipelines` reads the attribute
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        pyspark.pipelines = sdp


def load_python_file(path: Path, registry: PipelineRegistry, session: PipelineSession) -> ModuleType:
    """Import the pipeline file at ``path`` with ``spark`` defined as ``session``, its
    datasets registered in ``registry``. An error in the file stops the load naming it."""
    module_name = f"lakehouse_pipeline.{registry.project.name}.{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PipelineError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    module.__dict__["spark"] = session
    with graph_element_registration_context(registry), _lakeflow_names(), deferred_columns():
        try:
            spec.loader.exec_module(module)
        except PipelineError as exc:
            if str(exc).startswith(str(path)) or str(exc).startswith(str(registry.project.spec_file)):
                raise
            raise PipelineError(f"{_where(exc, path)}: {exc}") from exc
        except NameError as exc:
            if exc.name in _DATABRICKS_ONLY:
                raise PipelineError(
                    f"{_where(exc, path)}: the file calls {exc.name} while it is loaded; {exc.name} is Databricks' "
                    f"own and has no counterpart here: {_DATABRICKS_ONLY[exc.name]}") from exc
            raise PipelineError(f"{_where(exc, path)}: loading the pipeline file failed: NameError: {exc}") from exc
        except Exception as exc:
            raise PipelineError(f"{_where(exc, path)}: loading the pipeline file failed: "
                                f"{type(exc).__name__}: {exc}") from exc
    return module


def _where(exc: BaseException, path: Path) -> str:
    """``path:line``, the line of ``path`` the error was raised under."""
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f"{path}:{line}" if line else str(path)
