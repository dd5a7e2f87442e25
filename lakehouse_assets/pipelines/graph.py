"""A pipeline's dataflow graph as its source files declare it: datasets, the flows that
fill them, and their expectations. Filled by pyspark's own decorators (``@dp.table``, ...)
through :class:`PipelineRegistry`, the graph element registry ``spark-pipelines`` would use,
so nothing here runs a query: the files are imported, their functions kept for later.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pyspark.pipelines.flow import AutoCdcFlow, Flow
from pyspark.pipelines.graph_element_registry import GraphElementRegistry
from pyspark.pipelines.output import MaterializedView, Output, Sink, StreamingTable, TemporaryView
from pyspark.pipelines.source_code_location import SourceCodeLocation
from pyspark.sql.types import StructType

from lakehouse_assets.cdc import AutoCdc
from lakehouse_assets.pipelines.spec import PipelineError, PipelineProject, SourceLocation
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.tables.sql_definition import SqlConstraint

#: Where a function's expectations are kept, by the ``@dp.expect*`` decorators under ``@dp.table``.
EXPECTATIONS_ATTRIBUTE = "__lakehouse_expectations__"


class DatasetKind(StrEnum):
    """What a pipeline dataset is."""

    streaming_table = "streaming table"
    materialized_view = "materialized view"
    temporary_view = "temporary view"


@dataclass(frozen=True)
class SnapshotFlow:
    """AUTO CDC FROM SNAPSHOT: the table kept by ``keys`` from full snapshots, given by the flow's
    function (``next_snapshot_and_version``) or its ``source`` table at each of its versions."""

    keys: tuple[str, ...]
    stored_as_scd_type: int
    track_history_column_list: tuple[str, ...] | None


@dataclass(frozen=True)
class PipelineFlow:
    """A query filling a dataset: the function returning its DataFrame; for an AUTO CDC flow,
    how it applies the change feed (``auto_cdc``) and the table it streams it from (``source``)."""

    name: str
    func: Callable[..., Any]
    location: SourceLocation
    spark_conf: dict[str, str]
    auto_cdc: AutoCdc | None = None
    source: str | None = None
    snapshot: SnapshotFlow | None = None


@dataclass
class PipelineDataset:
    """A dataset of the pipeline: ``table`` is ``schema.name``."""

    table: str
    kind: DatasetKind
    location: SourceLocation
    comment: str | None = None
    schema: StructType | str | None = None
    table_properties: dict[str, str] = field(default_factory=dict)
    #: ``partition_cols`` / ``cluster_by``: the columns the table is laid out by.
    partitioned_by: tuple[str, ...] = ()
    clustered_by: tuple[str, ...] = ()
    flows: list[PipelineFlow] = field(default_factory=list)
    expectations: list[SqlConstraint] = field(default_factory=list)

    @property
    def flow(self) -> PipelineFlow:
        """The first flow filling the dataset (most have one)."""
        return self.flows[0]


def location(where: SourceCodeLocation) -> SourceLocation:
    """pyspark's source location as the lakehouse's. pyspark takes its caller's line; when that
    is one of the lakehouse's Lakeflow names (``dlt.table(temporary=True)``), the pipeline
    file's line that called it."""
    file = Path(where.filename)
    if _PACKAGE not in file.resolve().parents:
        return SourceLocation(file, where.line_number)
    frame = inspect.currentframe()
    while frame is not None:
        caller = Path(frame.f_code.co_filename).resolve()
        if _PACKAGE not in caller.parents and "pyspark" not in caller.parts:
            return SourceLocation(caller, frame.f_lineno)
        frame = frame.f_back
    return SourceLocation(file, where.line_number)


_PACKAGE = Path(__file__).resolve().parents[1]

_KINDS = {MaterializedView: DatasetKind.materialized_view, StreamingTable: DatasetKind.streaming_table,
          TemporaryView: DatasetKind.temporary_view}


class PipelineRegistry(GraphElementRegistry):
    """Collects what a pipeline's files register, by table (``schema.name``), as they load for ``settings``."""

    def __init__(self, project: PipelineProject, settings: LakehouseSettings) -> None:
        self.project = project
        self.settings = settings
        self.datasets: dict[str, PipelineDataset] = {}

    def register_output(self, output: Output) -> None:
        where = location(output.source_code_location)
        if isinstance(output, Sink):
            raise PipelineError(
                f"{where}: sink {output.name!r} (format {output.format!r}) writes outside the lakehouse, which "
                "the asset graph does not map; keep the pipeline's tables here and export from one of them")
        kind = _KINDS.get(type(output))
        if kind is None:
            raise PipelineError(f"{where}: {type(output).__name__} {output.name!r} is not a dataset this graph maps")
        table = self.project.qualified(output.name, where)
        if table in self.datasets:
            raise PipelineError(f"{where}: {table} is defined twice (first at {self.datasets[table].location})")
        partitioned_by: tuple[str, ...] = ()
        clustered_by: tuple[str, ...] = ()
        if kind is not DatasetKind.temporary_view:
            assert isinstance(output, MaterializedView | StreamingTable)
            if output.format not in (None, "delta"):
                raise PipelineError(f"{where}: {table} sets format={output.format!r}: the lakehouse's tables are "
                                    "Delta tables; remove it (or write format='delta') to run the pipeline here")
            partitioned_by, clustered_by = tuple(output.partition_cols or ()), tuple(output.cluster_by or ())
            if partitioned_by and clustered_by:
                raise PipelineError(f"{where}: {table} sets both partition_cols and cluster_by: Delta allows one "
                                    "or the other; keep one of the two")
        self.datasets[table] = PipelineDataset(
            table=table, kind=kind, location=where, comment=output.comment,
            schema=getattr(output, "schema", None), table_properties=dict(getattr(output, "table_properties", {})),
            partitioned_by=partitioned_by, clustered_by=clustered_by)

    def register_flow(self, flow: Flow) -> None:
        where = location(flow.source_code_location)
        table = self.project.qualified(flow.target, where)
        dataset = self.datasets.get(table)
        if dataset is None:
            raise PipelineError(f"{where}: flow {flow.name!r} writes to {table}, which no dataset of the pipeline "
                                "defines; declare it first (dp.create_streaming_table)")
        if dataset.flows and (dataset.kind is not DatasetKind.streaming_table or dataset.flow.auto_cdc is not None):
            raise PipelineError(
                f"{where}: flow {flow.name!r} is a second flow into {table} (the first at {dataset.flow.location}); "
                f"a {'table kept by AUTO CDC' if dataset.flows[0].auto_cdc else dataset.kind} is filled by its one "
                "query; append flows go into streaming tables")
        if any(existing.name == flow.name for existing in dataset.flows):
            raise PipelineError(f"{where}: {table} already has a flow named {flow.name!r}; name each flow (its "
                                "checkpoint is its own)")
        dataset.flows.append(PipelineFlow(flow.name, flow.func, where, dict(flow.spark_conf)))
        dataset.expectations.extend(getattr(flow.func, EXPECTATIONS_ATTRIBUTE, ()))

    def expect(self, name: str, expectations: Sequence[SqlConstraint]) -> None:
        """Expectations of the dataset ``name`` declared with it (``create_streaming_table(expect_all=...)``)."""
        self.datasets[self.project.qualified(name)].expectations.extend(expectations)

    def register_auto_cdc_flow(self, flow: AutoCdcFlow) -> None:
        # pyspark's own create_auto_cdc_flow; the Lakeflow module a pipeline file sees has the
        # lakehouse's (pipelines/auto_cdc.py), which calls register_change_flow.
        raise PipelineError(f"{location(flow.source_code_location)}: create_auto_cdc_flow into {flow.target!r} "
                            "was called outside a pipeline file the lakehouse loads")

    def register_change_flow(self, name: str, target: str, source: str, spec: AutoCdc, where: SourceLocation,
                             feed: Callable[[str], Any]) -> None:
        """An AUTO CDC flow: the change feed from ``source`` (``feed(table)``) applied to ``target``."""
        table = self.project.qualified(target, where)
        dataset = self.datasets.get(table)
        if dataset is None or dataset.kind is not DatasetKind.streaming_table:
            raise PipelineError(f"{where}: the AUTO CDC flow {name!r} applies changes to {table}, which must be "
                                "declared first with dp.create_streaming_table")
        if dataset.flows:
            raise PipelineError(f"{where}: {table} already has a flow (at {dataset.flow.location}); a table kept "
                                "by AUTO CDC is kept by its one AUTO CDC flow")
        changes = self.project.qualified(source, where)
        dataset.flows.append(PipelineFlow(name, lambda: feed(changes), where, {}, auto_cdc=spec, source=changes))

    def register_snapshot_flow(self, name: str, target: str, source: str | Callable[..., Any], spec: SnapshotFlow,
                               where: SourceLocation) -> None:
        """An AUTO CDC FROM SNAPSHOT flow into ``target`` from a table or a snapshot function."""
        table = self.project.qualified(target, where)
        dataset = self.datasets.get(table)
        if dataset is None or dataset.kind is not DatasetKind.streaming_table or dataset.flows:
            raise PipelineError(f"{where}: the AUTO CDC FROM SNAPSHOT flow {name!r} keeps {table}, which must be "
                                "declared with dp.create_streaming_table and kept by this flow alone")
        if isinstance(source, str):
            snapshotted = self.project.qualified(source, where)
            dataset.flows.append(PipelineFlow(name, lambda: None, where, {}, source=snapshotted, snapshot=spec))
        else:
            dataset.flows.append(PipelineFlow(name, source, where, {}, snapshot=spec))

    def register_sql(self, sql_text: str, file_path: Path) -> None:
        # Imported here: the SQL files register through this registry (a cycle at import time).
        from lakehouse_assets.pipelines.sql_files import register_sql_file

        register_sql_file(self, sql_text, file_path)

    def finished(self) -> dict[str, PipelineDataset]:
        """The datasets, each checked to have its query."""
        for dataset in self.datasets.values():
            if not dataset.flows:
                raise PipelineError(f"{dataset.location}: {dataset.table} is declared but no flow fills it")
        return self.datasets
