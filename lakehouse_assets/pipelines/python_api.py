"""Loading a pipeline's Python files unchanged: ``from pyspark import pipelines as dp`` (or
Lakeflow's ``import dlt``) is, while a file is imported, one module holding pyspark's own API
and what Lakeflow adds (expectations, ``read`` / ``read_stream``, the older names). Both names
are put back afterwards, so an installed ``dlt`` is shadowed only during the import.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
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
from lakehouse_assets.pipelines.graph import EXPECTATIONS_ATTRIBUTE, PipelineRegistry
from lakehouse_assets.pipelines.import_columns import deferred_columns
from lakehouse_assets.pipelines.session import PipelineSession, active_run
from lakehouse_assets.pipelines.spec import PipelineError
from lakehouse_assets.tables.sql_definition import OnViolation, SqlConstraint

_MODULE = "pyspark.pipelines"
# Databricks' notebook globals, and what to write instead.
DATABRICKS_GLOBALS = {
    "dbutils": "list folders with pathlib or os, and pass settings through the pipeline's configuration "
               "(spark.conf.get)",
    "display": "leave displays out of pipeline files", "displayHTML": "leave displays out of pipeline files"}
_LEGACY_MODULE = "dlt"


def _expecting(on_violation: OnViolation, expectations: Mapping[str, str]) -> Callable[[Any], Any]:
    def decorate(func: Any) -> Any:
        if not callable(func):
            raise PipelineError(
                f"@expect... decorates a dataset's function: put it below @dp.table (it was given {func!r})")
        declared = [SqlConstraint(name, condition, on_violation) for name, condition in expectations.items()]
        # Decorators apply from the bottom up: keep the order they are written in.
        setattr(func, EXPECTATIONS_ATTRIBUTE, [*declared, *getattr(func, EXPECTATIONS_ATTRIBUTE, [])])
        return func
    return decorate


def _expectations() -> dict[str, Any]:
    """Lakeflow's ``expect(name, condition)`` and ``expect_all({name: condition})``: a failing row
    kept and counted; ``_or_drop``: quarantined, ``name`` its reason; ``_or_fail``: fails the update."""
    found: dict[str, Any] = {}
    for suffix, on_violation in (("", OnViolation.warn), ("_or_drop", OnViolation.drop_row),
                                 ("_or_fail", OnViolation.fail_update)):
        found[f"expect{suffix}"] = partial(lambda v, name, condition: _expecting(v, {name: condition}), on_violation)
        found[f"expect_all{suffix}"] = partial(_expecting, on_violation)
    return found


def create_streaming_table(name: str, *args: Any, expect_all: Mapping[str, str] | None = None,
                           expect_all_or_drop: Mapping[str, str] | None = None,
                           expect_all_or_fail: Mapping[str, str] | None = None, **kwargs: Any) -> None:
    """pyspark's ``create_streaming_table``, with Lakeflow's ``expect_all*`` expectations of the table."""
    sdp.create_streaming_table(name, *args, **kwargs)
    declared = [SqlConstraint(rule, condition, on_violation) for on_violation, given in (
        (OnViolation.warn, expect_all), (OnViolation.drop_row, expect_all_or_drop),
        (OnViolation.fail_update, expect_all_or_fail)) for rule, condition in (given or {}).items()]
    registry = get_active_graph_element_registry()
    if declared and isinstance(registry, PipelineRegistry):
        registry.expect(name, declared)


def table(query_function: Any = None, *, temporary: bool = False, **kwargs: Any) -> Any:
    """pyspark's ``table``, taking Lakeflow's ``temporary``: a table of the pipeline's own here too."""
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
        **_expectations(), read=read, read_stream=read_stream, create_streaming_table=create_streaming_table,
        table=table, materialized_view=materialized_view,
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
    """Import the pipeline file at ``path``, ``spark`` being ``session``; an error stops the load naming it."""
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
            if exc.name in DATABRICKS_GLOBALS:
                raise PipelineError(
                    f"{_where(exc, path)}: the file calls {exc.name} while it is loaded; {exc.name} is Databricks' "
                    f"own and has no counterpart here: {DATABRICKS_GLOBALS[exc.name]}") from exc
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
