"""What a table asset's body hands the Delta IO manager, and what the manager hands back.

A body returns the transformation only (a DataFrame, :class:`ExpectedRows`, an
:class:`IncrementalSource`, :class:`AppendFlows`, :class:`RoutedRows` or :class:`TableKept`),
and the IO manager picks the handler by its type; an input comes in as an
:class:`UpstreamTable`, or as :class:`MissingTable` before its table exists. Declarations and
the IO manager both import these from here, so the IO layer knows nothing of declarations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from lakehouse_assets.quality.rules import Rule
from lakehouse_assets.streaming import RestartPolicy


@dataclass(frozen=True)
class IncrementalSource:
    """What an ingestion asset returns: how to build its streaming DataFrame, so the query
    can be rebuilt and restarted when the source's schema evolves mid-run."""

    build: Callable[[], DataFrame]
    restart_when: RestartPolicy | None = None
    # Whether anything arrived since the last run (None: cannot tell), so that a run with
    # nothing to do does not start a query.
    has_new_data: Callable[[], bool | None] | None = None
    # The landed files the run found unread before its query (Spark's URIs), so that those
    # deleted before it read them are named.
    unread: Callable[[], list[str]] | None = None
    # How many times one run may restart the query when ``restart_when`` says so.
    max_restarts: int = 3
    # The asset's expectations (WARN and FAIL), filled in from its declaration.
    expectations: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class AppendFlow:
    """One query appending to a table: its name (its checkpoint's) and how to build its
    streaming DataFrame."""

    name: str
    build: Callable[[], DataFrame]


@dataclass(frozen=True)
class AppendFlows:
    """What a table filled by several append flows returns (Lakeflow's ``@dp.append_flow``):
    each flow runs as a query of its own, with its own checkpoint, into the one table."""

    flows: tuple[AppendFlow, ...]
    # The asset's expectations (WARN and FAIL), filled in from its declaration.
    expectations: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class ExpectedRows:
    """A table asset's DataFrame as the IO manager writes it: the body's rows and the rules
    each write enforces (WARN and FAIL; ERROR rules route rows, see :class:`RoutedRows`);
    none for a body declared without expectations."""

    rows: DataFrame
    expectations: tuple[Rule, ...]


@dataclass(frozen=True)
class RoutedRows:
    """What a table asset with a quarantine returns: its rows, and the columns each
    destination keeps. ``expectations`` are filled in from the declaration
    (:func:`~lakehouse_assets.assets.routed_table_asset.routed_table_asset`): the IO manager routes
    each row by them."""

    rows: DataFrame
    passed_columns: Sequence[Any]
    quarantine_columns: Sequence[Any]
    expectations: tuple[Rule, ...] = ()
    #: The columns a record is unique by: a passing row the table already holds (or that an
    #: earlier row of its batch repeats) goes to quarantine as a ``duplicate``.
    unique_by: Sequence[str] = ()


@dataclass(frozen=True)
class QuarantineOf:
    """The quarantine output of a routed table: written by the main table's query, so its
    IO manager step only reports what that query put there."""

    table: dg.AssetKey


@dataclass(frozen=True)
class UpstreamTable:
    """An input as the Delta IO manager hands it in: the upstream table (``layer.name``) and
    how to read it (as a stream of the rows each new version adds, or as it stands), read when
    the consuming asset's body runs, not before: a table with nothing new starts no Spark."""

    table: str
    read: Callable[[], DataFrame]


@dataclass(frozen=True)
class MissingTable:
    """An input whose upstream table has not been created yet: the consuming asset is skipped."""

    table: str  # layer.name


@dataclass(frozen=True)
class TableKept:
    """What a table asset outputs when it writes nothing (nothing new, or a landing folder
    holding no files under a table that exists) but a table below it in the run needs it:
    the table is reported as it stands, nothing is written."""

    reason: str
