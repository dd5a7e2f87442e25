"""A grouped aggregation kept incrementally: what it groups by, what it measures, and how a
batch's partial results merge into the groups' running ones.

Every measure here is decomposable: the result over all rows is computed from results over
parts of them. ``sum``, ``count``, ``min`` and ``max`` merge as themselves (counts add up);
``mean`` is kept as a sum and a count, and divided when the table is written. So a batch
changes only the groups it has rows for, and nothing needs the rows of earlier batches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.errors import ConfigurationError

MeasureFunction = Literal["sum", "count", "min", "max", "mean"]
#: How each measure is kept between batches: the partials it is made of.
_PARTS: dict[str, tuple[str, ...]] = {
    "sum": ("sum",), "count": ("count",), "min": ("min",), "max": ("max",), "mean": ("sum", "count")}
#: How the partials of two parts of the rows merge.
_MERGE = {"sum": F.sum, "count": F.sum, "min": F.min, "max": F.max}
_COMPUTE = {"sum": F.sum, "count": F.count, "min": F.min, "max": F.max}


@dataclass(frozen=True)
class Measure:
    """One aggregate column: ``name`` = ``function``(``expression``), a SQL expression over
    the source rows (``*`` for ``count(*)``)."""

    name: str
    function: MeasureFunction
    expression: str

    def partial_columns(self) -> list[str]:
        """The state columns this measure is kept in."""
        return [f"__{part}_{self.name}" for part in _PARTS[self.function]]


@dataclass(frozen=True)
class IncrementalAggregate:
    """``SELECT keys..., measures... FROM source GROUP BY keys``, kept by merging each batch's
    partial results by key. ``keys`` are ``(name, SQL expression)`` pairs; ``columns`` is the
    table's column order."""

    keys: tuple[tuple[str, str], ...]
    measures: tuple[Measure, ...]
    columns: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise ConfigurationError("An incremental aggregate groups by at least one key")
        unknown = [m.function for m in self.measures if m.function not in _PARTS]
        if unknown:
            raise ConfigurationError(f"Measures {unknown} cannot be kept incrementally; use sum, count, min, max, mean")

    def as_metadata(self) -> dict[str, Any]:
        """The aggregate as plain data (definition metadata); :meth:`from_metadata` reads it."""
        return {"keys": [list(k) for k in self.keys], "measures": [dataclasses.asdict(m) for m in self.measures],
                "columns": list(self.columns)}

    @classmethod
    def from_metadata(cls, data: Mapping[str, Any]) -> IncrementalAggregate:
        """The aggregate :meth:`as_metadata` wrote."""
        return cls(keys=tuple((str(n), str(sql)) for n, sql in data["keys"]),
                   measures=tuple(Measure(**m) for m in data["measures"]), columns=tuple(data["columns"]))

    @property
    def key_names(self) -> list[str]:
        """The names of the group columns: the table's row identity."""
        return [name for name, _ in self.keys]

    def partials(self, rows: DataFrame) -> DataFrame:
        """The partial results of ``rows`` (source rows), one row per group."""
        parts = [_COMPUTE[part](_input(m, part)).alias(column)
                 for m in self.measures for part, column in zip(_PARTS[m.function], m.partial_columns(), strict=True)]
        return rows.groupBy(*[F.expr(sql).alias(name) for name, sql in self.keys]).agg(*parts)

    def merged(self, partials: Sequence[DataFrame]) -> DataFrame:
        """Partial results of several parts of the rows (state rows, a batch's partials) merged
        into one row per group."""
        rows = partials[0]
        for more in partials[1:]:
            rows = rows.unionByName(more)
        merges = [_MERGE[part](F.col(column)).alias(column)
                  for m in self.measures for part, column in zip(_PARTS[m.function], m.partial_columns(), strict=True)]
        return rows.groupBy(*self.key_names).agg(*merges)

    def results(self, state: DataFrame) -> DataFrame:
        """The table's rows from the groups' partial results."""
        return state.select(*[_result(self, name) for name in self.columns])


def _input(measure: Measure, part: str) -> Column:
    if measure.expression.strip() == "*":
        return F.lit(1)
    return F.expr(measure.expression)


def _result(spec: IncrementalAggregate, name: str) -> Column:
    if name in spec.key_names:
        return F.col(name)
    measure = next(m for m in spec.measures if m.name == name)
    parts = measure.partial_columns()
    if measure.function == "mean":
        total, count = (F.col(p) for p in parts)
        return F.when(count > 0, total.cast("double") / count).alias(name)
    return F.col(parts[0]).alias(name)
