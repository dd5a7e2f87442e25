"""A table's contract: its Pandera model (columns and types) plus its rules.

Pandera's PySpark support validates the structure in Spark: which columns, which types.
It reports *which* checks failed, not how many rows or which ones, so row-level rules are
:class:`~lakehouse_assets.quality.rules.Rule` columns, counted by the table's writes
(:mod:`lakehouse_assets.quality.expectations`) or in one Spark pass by
:mod:`lakehouse_assets.quality.evaluation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import pandera.pyspark as pa
from pandera.config import ValidationDepth, config_context
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from lakehouse_assets.quality.rules import Rule, UniqueKey


def model(name: str, table: str, columns: Mapping[str, tuple[T.DataType, str]], *,
          strict: bool = True) -> type[pa.DataFrameModel[Any]]:
    """The Pandera model ``name`` of ``table``: ``columns`` in order, each a Spark type and a
    description, and all nullable (nulls are the rules' business); when ``strict``, no others."""
    # Pandera skips attributes with a leading underscore: such a column is the alias of one without.
    fields = {column: column.lstrip("_") for column in columns}
    namespace: dict[str, Any] = {
        attribute: pa.Field(nullable=True, description=columns[column][1] or None,
                            alias=column if attribute != column else None)
        for column, attribute in fields.items()}
    namespace["__annotations__"] = {attribute: columns[column][0] for column, attribute in fields.items()}
    namespace["Config"] = type("Config", (), {"name": table, "strict": strict})
    return cast("type[pa.DataFrameModel[Any]]", type(name, (pa.DataFrameModel,), namespace))


@dataclass(frozen=True)
class StructureError:
    """One thing Pandera found wrong with a table's structure."""

    column: str | None
    check: str
    error: str


@dataclass(frozen=True)
class DescribedColumn:
    """A column a table declares, with what it holds: from a contract's model
    (``pa.Field(description=...)``) or a SQL definition's column comment. ``type`` is Spark's
    name for it (``bigint``), or empty when not declared."""

    name: str
    description: str
    type: str = ""


@dataclass(frozen=True)
class Contract:
    """What the table ``layer.name`` promises: ``model``'s columns and types, the row
    ``rules`` every row satisfies, and the ``unique`` keys no two rows share."""

    layer: str
    name: str
    model: type[pa.DataFrameModel[Any]]
    rules: tuple[Rule, ...] = ()
    unique: tuple[UniqueKey, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        columns = {c.lower() for c in self.columns}
        checked: list[Rule | UniqueKey] = [*self.rules, *self.unique]
        for rule in checked:
            missing = [c for c in rule.columns if c.lower() not in columns]
            if missing:
                raise ValueError(
                    f"Contract {self.table}: rule {rule.name!r} reads {missing}, which the model "
                    f"{self.model.__name__} does not declare. Add the columns to the model or drop the rule."
                )
        names = [r.name for r in checked]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"Contract {self.table}: rule names {duplicated} appear twice; names must be unique")

    @property
    def table(self) -> str:
        """``layer.name``, as the lakehouse names tables."""
        return f"{self.layer}.{self.name}"

    @property
    def key(self) -> list[str]:
        """The asset key path of the table: ``[layer, name]``."""
        return [self.layer, self.name]

    @property
    def columns(self) -> list[str]:
        """The columns the model declares, in order."""
        return list(self.model.to_schema().columns)

    def described_columns(self) -> list[DescribedColumn]:
        """The model's columns in order, with their types and their ``Field`` descriptions."""
        return [DescribedColumn(name, column.description or "", _spark_type(column.dtype))
                for name, column in self.model.to_schema().columns.items()]

    def structure_errors(self, df: DataFrame) -> list[StructureError]:
        """What is wrong with ``df``'s columns and types, by Pandera at schema depth: no
        data is read (every declared column is nullable; nulls are the rules' business)."""
        with config_context(validation_depth=ValidationDepth.SCHEMA_ONLY):
            validated = self.model.to_schema().validate(df, lazy=True)
        # The pandera accessor is registered at runtime; to the stubs, ``.pandera`` is a Column.
        return flatten_errors(cast(dict[str, Any], validated.pandera.errors))


def _spark_type(dtype: Any) -> str:
    """Spark's name for a Pandera PySpark column type (``bigint``), or empty if it has none."""
    spark_type: Any = getattr(dtype, "type", None)
    return str(spark_type.simpleString()) if hasattr(spark_type, "simpleString") else ""


def flatten_errors(errors: dict[str, Any]) -> list[StructureError]:
    """Pandera's ``{depth: {reason: [error, ...]}}`` as a flat list."""
    flat = []
    for reasons in errors.values():
        for entries in reasons.values():
            for entry in entries:
                column = entry.get("column")
                flat.append(StructureError(None if column == entry.get("schema") else column,
                                           str(entry.get("check")), str(entry.get("error"))))
    return flat
