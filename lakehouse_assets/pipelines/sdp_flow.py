"""What a flow of an exported SDP project (``lakehouse export-sdp``) calls: a table asset's own
transformation, run on the DataFrames the flow read by name, so ``spark-pipelines run`` runs
the project's code, not a copy. Open-source SDP has no quarantine: a routed table keeps its
passing rows only.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from functools import reduce
from typing import Any, cast

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakehouse_assets.assets.routed_table_asset import ROUTING_RULES_ATTRIBUTE
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.outputs import RoutedRows
from lakehouse_assets.quality.rules import Rule, Severity


def transformation(module: str, attribute: str) -> tuple[Callable[..., Any], tuple[Rule, ...]]:
    """The function a table asset (``module.attribute``) was declared with, and its routing rules."""
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
    # Cast by name, never by asking for the rows' columns: that is an analysis, which SDP
    # refuses inside a query function (ATTEMPT_ANALYSIS_IN_PIPELINE_QUERY_FUNCTION).
    types = column_types or {}
    return rows.withColumns({c: F.col(f"`{c}`").cast(t) for c, t in types.items()}) if types else rows


def with_schema(df: DataFrame, schema_json: str) -> DataFrame:
    """``df`` with the lakehouse table's schema (JSON) as its ``_cached_schema``, whence pyspark's
    Connect DataFrame answers ``columns``: SDP refuses any analysis inside a query function."""
    setattr(df, "_cached_schema", StructType.fromJson(json.loads(schema_json)))  # noqa: B010 - private
    return df


def passing_rows(routed: RoutedRows, rules: tuple[Rule, ...]) -> DataFrame:
    """The rows a routed table keeps: those passing every dropping rule, its duplicates kept (see below)."""
    dropping = [rule.condition() for rule in rules if rule.severity is Severity.ERROR]
    rows = routed.rows
    if dropping:
        rows = rows.where(reduce(lambda a, b: a & b, dropping))
    # Duplicates (``unique_by``) are kept: Spark Connect's planner analyzes the input of
    # dropDuplicates(columns) as the flow registers, before the datasets it reads exist, and
    # SDP fails the registration (TABLE_OR_VIEW_NOT_FOUND).
    return rows.select(*routed.passed_columns)
