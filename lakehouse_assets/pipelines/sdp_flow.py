"""What a flow of an exported SDP project (``lakehouse export-sdp``) calls: a table asset's own
transformation, run on the DataFrames the flow read by name, so ``spark-pipelines run`` runs
the project's code and not a copy of it.

A routed table's rows are its passing rows only: open-source SDP has no quarantine (nor
``expect_or_drop``), so the rows its routing rules refuse, and the duplicates it keeps out,
are filtered away instead of kept in ``<table>_quarantine``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from functools import reduce
from typing import Any, cast

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.assets.routed_table_asset import ROUTING_RULES_ATTRIBUTE, RoutedRows
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.quality.rules import Rule, Severity


def transformation(module: str, attribute: str) -> tuple[Callable[..., Any], tuple[Rule, ...]]:
    """The function a table asset (``module.attribute``) was declared with, and the rules
    routing its rows (none unless it is a routed table)."""
    asset = getattr(importlib.import_module(module), attribute, None)
    if not isinstance(asset, dg.AssetsDefinition):
        raise LakehouseError(
            f"{module}.{attribute} is not a table asset (it is {type(asset).__name__}); export the project "
            "again with `lakehouse export-sdp DIR --force`, since its code changed")
    body = cast(Any, asset.op.compute_fn).decorated_fn
    declared = getattr(body, "__wrapped__", None)
    if declared is None:
        raise LakehouseError(f"{module}.{attribute} was not declared with table_asset or routed_table_asset")
    return declared, tuple(getattr(body, ROUTING_RULES_ATTRIBUTE, ()))


def flow(module: str, attribute: str, *, column_types: Mapping[str, str] | None = None,
         **inputs: DataFrame) -> DataFrame:
    """The rows table asset ``module.attribute`` writes, computed from ``inputs`` (its
    parameters, read by the flow), each declared column cast to its declared type as the
    lakehouse's writes cast it."""
    declared, rules = transformation(module, attribute)
    returned = declared(**inputs)
    rows = passing_rows(returned, rules) if isinstance(returned, RoutedRows) else returned
    if not isinstance(rows, DataFrame):
        raise LakehouseError(f"{module}.{attribute} returned {type(returned).__name__}, not a DataFrame: "
                             "only transformations of tables can run as SDP flows")
    types = column_types or {}
    return rows.select(*[F.col(f"`{c}`").cast(types[c]).alias(c) if c in types else F.col(f"`{c}`")
                         for c in rows.columns])


def passing_rows(routed: RoutedRows, rules: tuple[Rule, ...]) -> DataFrame:
    """The rows a routed table keeps: those passing every rule that drops (ERROR), one per
    ``unique_by`` values, with the table's columns."""
    dropping = [rule.condition() for rule in rules if rule.severity is Severity.ERROR]
    rows = routed.rows
    if dropping:
        rows = rows.where(reduce(lambda a, b: a & b, dropping))
    if routed.unique_by:
        rows = rows.dropDuplicates(list(routed.unique_by))
    return rows.select(*routed.passed_columns)
