"""Column expressions a pipeline file builds while it is imported (``sequence_by=col("ts")``).
Classic pyspark builds a Column in the JVM, which is not there while the lakehouse loads a
pipeline, so during the import ``pyspark.sql.functions`` records the calls instead: a
:class:`DeferredColumn`, built for real in the session at hand when Spark asks for it, or
rendered as SQL text (:func:`sql_text`). Elsewhere, and in other threads, they are pyspark's own.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, cast

import pyspark.sql
import pyspark.sql.functions as spark_functions
from pyspark.sql.classic.column import Column as ClassicColumn
from pyspark.sql.column import Column

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.storage.merge import quote, sql_literal

_FUNCTIONS = "pyspark.sql.functions"
_importing = threading.local()
_swap = threading.Lock()


@dataclass(frozen=True)
class _Call:
    """A call recorded during an import: of pyspark.sql.functions (``receiver`` None) or a Column method."""

    receiver: DeferredColumn | None
    name: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]


class DeferredColumn(ClassicColumn):
    """A Column built during a pipeline file's import: its calls, made in the session at hand when needed."""

    def __init__(self, call: _Call) -> None:  # no JVM column: Spark's is built on demand
        self._call = call

    def resolve(self) -> Column:
        """The Column, built now with pyspark's own functions."""
        call = self._call
        args = [_resolved(a) for a in call.args]
        kwargs = {k: _resolved(v) for k, v in call.kwargs}
        if call.receiver is None:
            function: Callable[..., Column] = getattr(spark_functions, call.name)
            return function(*args, **kwargs)
        method: Callable[..., Column] = getattr(call.receiver.resolve(), call.name)
        return method(*args, **kwargs)

    @property
    def _jc(self) -> Any:  # what classic DataFrames read
        return cast(Any, self.resolve())._jc

    @property
    def _expr(self) -> Any:  # what Spark Connect DataFrames read
        return cast(Any, self.resolve())._expr

    def to_plan(self, session: Any) -> Any:
        """The Spark Connect plan of the Column (what a Connect DataFrame's plan asks of it)."""
        return cast(Any, self.resolve()).to_plan(session)

    def __repr__(self) -> str:
        return f"Column<{describe(self)}>"


def _recording_method(name: str) -> Callable[..., DeferredColumn]:
    def record(self: DeferredColumn, *args: Any, **kwargs: Any) -> DeferredColumn:
        return DeferredColumn(_Call(self, name, args, tuple(kwargs.items())))
    record.__name__ = name
    return record


# Every operator and method of pyspark's Column records itself (they all return a Column).
_NOT_RECORDED = {"__init__", "__new__", "__getnewargs__", "__repr__", "__bool__", "__nonzero__", "__iter__",
                 "__contains__", "__hash__", "__init_subclass__", "__subclasshook__", "__class_getitem__"}
for _name, _value in vars(Column).items():
    if callable(_value) and _name not in _NOT_RECORDED and (not _name.startswith("_") or _name.endswith("__")):
        setattr(DeferredColumn, _name, _recording_method(_name))


def _field(self: DeferredColumn, name: str) -> DeferredColumn:
    # ``column.field`` reads a struct field, as pyspark's Column does; Python's own probes
    # (``__deepcopy__``, ``_repr_html_``, ...) are not fields.
    if name.startswith("_"):
        raise AttributeError(name)
    return DeferredColumn(_Call(self, "__getitem__", (name,), ()))


DeferredColumn.__getattr__ = _field  # type: ignore[method-assign,assignment]


def _resolved(value: Any) -> Any:
    if isinstance(value, DeferredColumn):
        return value.resolve()
    if isinstance(value, list | tuple):
        return type(value)(_resolved(v) for v in value)
    return value


def _recording_function(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if getattr(_importing, "active", False):
            return DeferredColumn(_Call(None, name, args, tuple(kwargs.items())))
        return function(*args, **kwargs)
    call.__name__ = name
    call.__doc__ = function.__doc__
    return call


def _recording_module() -> ModuleType:
    module = ModuleType(_FUNCTIONS, spark_functions.__doc__)
    names = list(getattr(spark_functions, "__all__", ()))
    for name in names:
        value = getattr(spark_functions, name)
        returns_column = getattr(value, "__annotations__", {}).get("return") in (Column, "Column")
        setattr(module, name, _recording_function(name, value) if returns_column else value)
    module.__all__ = names  # type: ignore[attr-defined]
    return module


_RECORDING = _recording_module()


@contextmanager
def deferred_columns() -> Iterator[None]:
    """While a pipeline file is imported in this thread, ``pyspark.sql.functions`` records its calls."""
    with _swap:
        saved = sys.modules.get(_FUNCTIONS)
        sys.modules[_FUNCTIONS] = _RECORDING
        pyspark.sql.functions = _RECORDING
        _importing.active = True
        try:
            yield
        finally:
            _importing.active = False
            if saved is not None:
                sys.modules[_FUNCTIONS] = saved
            pyspark.sql.functions = spark_functions


# -- SQL text, for the arguments the lakehouse keeps as text -------------------------------------
_OPERATORS = {"__eq__": "=", "__ne__": "!=", "__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">=",
              "__and__": "AND", "__or__": "OR", "__add__": "+", "__sub__": "-", "__mul__": "*",
              "__truediv__": "/", "__mod__": "%", "eqNullSafe": "<=>"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class NotSqlError(ValueError):
    """A recorded Column with no SQL text here; the message says which part."""


def sql_text(value: Any) -> Any:
    """``value`` as the SQL text the lakehouse keeps: a recorded Column rendered (``col``, ``expr``,
    ``lit``, operators, ``isNull``/``isNotNull``/``isin``), other values as they are, lists item
    by item. Raises :class:`NotSqlError` for what it cannot render."""
    if isinstance(value, DeferredColumn):
        return _sql(value, top=True)
    if isinstance(value, list | tuple):
        return type(value)(sql_text(v) for v in value)
    return value


def _sql(column: DeferredColumn, *, top: bool = False) -> str:
    call = column._call
    args = call.args
    if call.receiver is None:
        if call.name in ("col", "column") and len(args) == 1 and isinstance(args[0], str):
            return args[0] if _IDENTIFIER.fullmatch(args[0]) else quote(args[0])
        if call.name == "expr" and len(args) == 1 and isinstance(args[0], str):
            return args[0] if top else f"({args[0]})"
        if call.name == "lit" and len(args) == 1:
            return _literal(args[0])
        raise NotSqlError(f"{call.name}(...) has no SQL text here; write it as expr(\"...\")")
    receiver = _sql(call.receiver)
    if call.name in _OPERATORS and len(args) == 1:
        text = f"{receiver} {_OPERATORS[call.name]} {_operand(args[0])}"
        return text if top else f"({text})"
    if call.name == "__invert__":
        return f"NOT {receiver}"
    if call.name in ("isNull", "isNotNull") and not args:
        return f"{receiver} IS {'NOT ' if call.name == 'isNotNull' else ''}NULL"
    if call.name == "isin":
        values = args[0] if len(args) == 1 and isinstance(args[0], list | tuple) else args
        return f"{receiver} IN ({', '.join(_operand(v) for v in values)})"
    raise NotSqlError(f".{call.name}(...) has no SQL text here; write the condition as expr(\"...\")")


def _operand(value: Any) -> str:
    return _sql(value) if isinstance(value, DeferredColumn) else _literal(value)


def _literal(value: Any) -> str:
    try:
        return "NULL" if value is None else sql_literal(value)
    except LakehouseError as exc:
        raise NotSqlError(f"the literal {value!r} has no SQL text here; write the condition as expr(\"...\")") from exc


def describe(column: DeferredColumn) -> str:
    """The recorded calls, for messages: ``col('a').__eq__('x')``."""
    call = column._call
    args = ", ".join([*(describe(a) if isinstance(a, DeferredColumn) else repr(a) for a in call.args),
                      *(f"{k}={v!r}" for k, v in call.kwargs)])
    return f"{call.name}({args})" if call.receiver is None else f"{describe(call.receiver)}.{call.name}({args})"


__all__ = ["DeferredColumn", "NotSqlError", "deferred_columns", "describe", "sql_text"]
