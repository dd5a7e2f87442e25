"""A pipeline folder as table assets: each stored dataset one asset ``<schema>/<name>``, made
by the same declarations as the project's own tables, so the IO manager, the checks, the
quarantine, the sensors and ``lakehouse verify`` treat it as they treat those; a temporary
view is inlined into its readers (docs/guides/lakeflow.md). Nothing here runs a Spark job:
the files are imported and their flows' reads read from their source (:mod:`.reads`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from lakehouse_assets.assets.auto_cdc import auto_cdc_from_snapshot_table, auto_cdc_table
from lakehouse_assets.assets.automation import downstream_of_new_data
from lakehouse_assets.assets.bronze import landing_source
from lakehouse_assets.assets.landing import LandingFolder
from lakehouse_assets.assets.routed_table_asset import routed_table_asset
from lakehouse_assets.assets.sql_asset import QUARANTINE_SUFFIX, expectation
from lakehouse_assets.assets.table_asset import table_asset
from lakehouse_assets.cdc import AutoCdc
from lakehouse_assets.cdc.snapshots import SnapshotSource
from lakehouse_assets.outputs import AppendFlow, AppendFlows, IncrementalSource, RoutedRows
from lakehouse_assets.pipelines.auto_cdc import snapshots_of
from lakehouse_assets.pipelines.graph import DatasetKind, PipelineDataset, PipelineFlow, PipelineRegistry
from lakehouse_assets.pipelines.landing_paths import landed_path
from lakehouse_assets.pipelines.python_api import load_python_file
from lakehouse_assets.pipelines.reads import FileRead, FlowReads, TableRead, flow_reads
from lakehouse_assets.pipelines.session import FILE_METADATA, PipelineRun, PipelineSession, running
from lakehouse_assets.pipelines.spec import PipelineError, PipelineProject, load_project
from lakehouse_assets.quality.contract import DescribedColumn
from lakehouse_assets.quality.rules import Rule, Severity
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LANDING_DIR, LakehouseSettings
from lakehouse_assets.spec import LANDING_FOLDERS
from lakehouse_assets.storage import type_sql
from lakehouse_assets.tables.sql_definition import SqlConstraint, SqlDefinitionError, check_name
from lakehouse_assets.tables.sql_types import UnknownTypeError, spark_type

CODE_REFERENCES = "dagster/code_references"


@dataclasses.dataclass(frozen=True)
class LoadedPipeline:
    """A pipeline folder, loaded: its project, datasets by table, and what each reads (views inlined)."""

    project: PipelineProject
    session: PipelineSession
    datasets: Mapping[str, PipelineDataset]
    reads: Mapping[str, FlowReads]

    @property
    def views(self) -> dict[str, PipelineDataset]:
        """The temporary views, by name."""
        return {t: d for t, d in self.datasets.items() if d.kind is DatasetKind.temporary_view}


def load_pipeline(folder: Path, settings: LakehouseSettings) -> LoadedPipeline:
    """Import the pipeline in ``folder`` for ``settings`` and read what each of its flows reads."""
    project = load_project(folder)
    session = PipelineSession(project, settings)
    registry = PipelineRegistry(project, settings)
    for file in project.files:
        if file.suffix == ".py":
            load_python_file(file, registry, session)
        else:
            registry.register_sql(file.read_text(encoding="utf-8"), file)
    # A temporary view with expectations is kept as a table of its own (streaming or recomputed
    # as it reads): inlined, the rows it drops would vanish uncounted; kept, they go to its
    # quarantine with their reasons and its counts to its commits.
    datasets = {table: dataclasses.replace(dataset, kind=DatasetKind.streaming_table)
                if dataset.kind is DatasetKind.temporary_view and dataset.expectations else dataset
                for table, dataset in registry.finished().items()}
    direct = {table: _reads(dataset, project) for table, dataset in datasets.items()}
    return LoadedPipeline(project, session, datasets, {table: _through_views(table, direct, datasets)
                                                       for table in datasets})


def _reads(dataset: PipelineDataset, project: PipelineProject) -> FlowReads:
    """What the dataset's flows read: an AUTO CDC flow its change feed, a Python flow what its source reads."""
    tables: list[TableRead] = []
    files: list[FileRead] = []
    for flow in dataset.flows:
        # A change feed is streamed; a table snapshotted is read as it stands.
        reads = (FlowReads((TableRead(flow.source, flow.snapshot is None, flow.location),), ())
                 if flow.source is not None else flow_reads(flow.func, project))
        tables.extend(reads.tables)
        files.extend(reads.files)
    return FlowReads(tuple(tables), tuple(files))


def _through_views(table: str, direct: Mapping[str, FlowReads], datasets: Mapping[str, PipelineDataset],
                   seen: tuple[str, ...] = ()) -> FlowReads:
    if table in seen:
        raise PipelineError(f"{datasets[table].location}: {' -> '.join([*seen, table])} reads itself")
    tables: list[TableRead] = []
    files = list(direct[table].files)
    for read in direct[table].tables:
        view = datasets.get(read.table)
        if view is None or view.kind is not DatasetKind.temporary_view:
            tables.append(read)
            continue
        inlined = _through_views(read.table, direct, datasets, (*seen, table))
        tables.extend(inlined.tables)
        files.extend(inlined.files)
    return FlowReads(tuple(tables), tuple(files))


def pipeline_assets(folder: Path, settings: LakehouseSettings) -> list[dg.AssetsDefinition]:
    """The table assets of the pipeline in ``folder``, with their quarantines."""
    pipeline = load_pipeline(folder, settings)
    return [_asset(pipeline, dataset, settings) for dataset in pipeline.datasets.values()
            if dataset.kind is not DatasetKind.temporary_view]


def _asset(pipeline: LoadedPipeline, dataset: PipelineDataset, settings: LakehouseSettings) -> dg.AssetsDefinition:
    reads = pipeline.reads[dataset.table]
    layer, name = dataset.table.split(".")
    folders = [_landing_folder(read, pipeline.project, settings) for read in reads.files]
    streams = any(read.streamed for read in reads.tables) or any(read.streamed for read in reads.files)
    if dataset.flow.snapshot is not None:
        return _from_snapshots(pipeline, dataset, _common(pipeline, dataset, reads, folders, []))
    if dataset.kind is DatasetKind.materialized_view and streams:
        raise PipelineError(f"{dataset.location}: the materialized view {dataset.table} reads a stream; a materialized "
                            "view reads its sources as they stand (spark.read), a streaming table reads streams")
    if dataset.kind is DatasetKind.streaming_table and not streams:
        # Lakeflow's @dlt.table over a batch query is a materialized view: recomputed whole.
        dataset = dataclasses.replace(dataset, kind=DatasetKind.materialized_view)
    rules = [_rule(dataset, e) for e in dataset.expectations]
    common = _common(pipeline, dataset, reads, folders, rules)
    build = _flow_frame(pipeline, dataset, dataset.flow)
    if dataset.flow.auto_cdc is not None:
        return _auto_cdc(common, dataset.flow.auto_cdc, build)
    if len(dataset.flows) > 1:
        return _append_flows(pipeline, dataset, common, reads)
    routes = any(rule.severity is Severity.ERROR for rule in rules)
    if any(read.cloud_files for read in reads.files):
        if len(reads.files) != 1 or reads.tables:
            raise PipelineError(f"{dataset.location}: {dataset.table} reads cloudFiles and other sources; Auto Loader "
                                "feeds a table of its own: read one landing folder per table")

        def _ingested(lakehouse: LakehouseResource) -> IncrementalSource:
            return _auto_loader_source(lakehouse, build)

        if routes:  # each landed record in the table or, dropped, in its quarantine
            return _routed(common, _ingested, merge_schema=True)
        return table_asset(output_mode="append", merge_schema=True, **common)(_ingested)
    if routes:
        def _routed_rows(lakehouse: LakehouseResource) -> RoutedRows:
            frame = build(lakehouse).frame
            return RoutedRows(rows=frame, passed_columns=frame.columns, quarantine_columns=frame.columns)

        return _routed(common, _routed_rows)

    @table_asset(output_mode="append", write_mode="overwrite", **common)
    def _dataset(lakehouse: LakehouseResource) -> DataFrame:
        return build(lakehouse).frame

    return _dataset


def _auto_cdc(common: dict[str, Any], spec: AutoCdc,
              build: Callable[[LakehouseResource], _Built]) -> dg.AssetsDefinition:
    @auto_cdc_table(keys=spec.keys, sequence_by=spec.sequence_by, stored_as_scd_type=spec.stored_as_scd_type,
                    apply_as_deletes=spec.apply_as_deletes, apply_as_truncates=spec.apply_as_truncates,
                    except_column_list=spec.except_column_list, column_list=spec.column_list,
                    track_history_column_list=spec.track_history_column_list,
                    track_history_except_column_list=spec.track_history_except_column_list, **common)
    def _changes_applied(lakehouse: LakehouseResource) -> DataFrame:
        return build(lakehouse).frame

    return _changes_applied


def _common(pipeline: LoadedPipeline, dataset: PipelineDataset, reads: FlowReads, folders: Sequence[LandingFolder],
            rules: Sequence[Rule]) -> dict[str, Any]:
    """What every kind of dataset declares alike: key, description, upstream, columns, layout, metadata."""
    layer, name = dataset.table.split(".")
    metadata: dict[str, Any] = {CODE_REFERENCES: _code_reference(dataset)}
    for folder in folders:
        metadata.update(folder.metadata())
    deps = sorted({*(read.table for read in reads.tables), *(f"{LANDING_DIR}.{f.source}" for f in folders)})
    description = dataset.comment or (dataset.flow.func.__doc__ or "").strip() or \
        f"The {dataset.kind} {name} of pipeline {pipeline.project.name}."
    return dict(
        layer=layer, name=name, description=description, deps=[dep.split(".") for dep in deps],
        columns=_columns(dataset), table_properties=dataset.table_properties or None,
        partitioned_by=dataset.partitioned_by, clustered_by=dataset.clustered_by, expectations=list(rules),
        streams_from=sorted({read.table for read in reads.tables if read.streamed}), metadata=metadata,
        pipeline=pipeline.project.name,
        # A table reading landed files runs when its landing sensor sees new ones.
        automation_condition=None if folders else downstream_of_new_data())


def _from_snapshots(pipeline: LoadedPipeline, dataset: PipelineDataset, common: dict[str, Any]) -> dg.AssetsDefinition:
    """A table kept AUTO CDC FROM SNAPSHOT."""
    flow = dataset.flow
    assert flow.snapshot is not None
    common.pop("expectations")

    @auto_cdc_from_snapshot_table(keys=flow.snapshot.keys, stored_as_scd_type=flow.snapshot.stored_as_scd_type,  # type: ignore[arg-type]
                                  track_history_column_list=flow.snapshot.track_history_column_list, **common)
    def _snapshots_applied(lakehouse: LakehouseResource) -> SnapshotSource:
        settings, spark = lakehouse.settings(), lakehouse.spark_session
        run = PipelineRun(spark, dataset.table, pipeline.views, settings, pipeline.session, lakehouse.store())
        with running(run):
            return snapshots_of(flow, spark, settings, lakehouse.store())

    return _snapshots_applied


def _append_flows(pipeline: LoadedPipeline, dataset: PipelineDataset, common: dict[str, Any],
                  reads: FlowReads) -> dg.AssetsDefinition:
    """A streaming table filled by several flows, each its own query and checkpoint."""
    unmapped = [what for what, found in (
        ("drops rows (expect_or_drop)", any(rule.severity is Severity.ERROR for rule in common["expectations"])),
        ("reads landed files", bool(reads.files))) if found]
    if unmapped:
        raise PipelineError(f"{dataset.location}: {dataset.table} is filled by {len(dataset.flows)} flows and "
                            f"{' and '.join(unmapped)}, which is not mapped yet for several flows: give each source "
                            "a streaming table of its own and append from those")
    builds = {flow.name: _flow_frame(pipeline, dataset, flow) for flow in dataset.flows}

    @table_asset(output_mode="append", **common)
    def _flows(lakehouse: LakehouseResource) -> AppendFlows:
        return AppendFlows(tuple(AppendFlow(name, partial(lambda b: b(lakehouse).frame, build))
                                 for name, build in builds.items()))

    return _flows


def _routed(common: dict[str, Any], body: Callable[[LakehouseResource], RoutedRows | IncrementalSource],
            merge_schema: bool = True) -> dg.AssetsDefinition:
    """A dataset dropping rows (``expect_or_drop``) into its quarantine, batch by batch or whole."""
    layer, name = common.pop("layer"), common.pop("name")
    described = "Rows" if common["streams_from"] or common["metadata"].get(LANDING_FOLDERS) else "Rows it now"
    routed = routed_table_asset(
        layer=layer, name=name, quarantine_name=name + QUARANTINE_SUFFIX, ins={}, merge_schema=merge_schema,
        quarantine_description=f"{described} {layer}.{name} dropped by its expect_or_drop expectations, with the "
        "names of those they failed.", **common)
    return routed(body)



@dataclasses.dataclass(frozen=True)
class _Built:
    frame: DataFrame
    run: PipelineRun


def _flow_frame(pipeline: LoadedPipeline, dataset: PipelineDataset,
                flow: PipelineFlow) -> Callable[[LakehouseResource], _Built]:
    """How a run gets a flow's DataFrame: its function called in the run's session, ``spark_conf`` set."""
    expected_streaming = dataset.kind is DatasetKind.streaming_table

    def build(lakehouse: LakehouseResource) -> _Built:
        spark = lakehouse.spark_session
        for key, value in flow.spark_conf.items():
            spark.conf.set(key, value)
        run = PipelineRun(spark, dataset.table, pipeline.views, lakehouse.settings(), pipeline.session,
                          lakehouse.store())
        with running(run):
            frame = flow.func()
        if not isinstance(frame, DataFrame):
            raise PipelineError(f"{flow.location}: the function of {dataset.table} returned "
                                f"{type(frame).__name__}, not a DataFrame")
        if FILE_METADATA in frame.columns:  # hidden in Spark: SELECT * leaves it out
            frame = frame.drop(FILE_METADATA)
        if frame.isStreaming != expected_streaming:
            raise PipelineError(f"{flow.location}: {dataset.table} is a {dataset.kind} but its function returned a "
                                f"{'streaming' if frame.isStreaming else 'batch'} DataFrame")
        return _Built(frame, run)

    return build


def _auto_loader_source(lakehouse: LakehouseResource,
                        build: Callable[[LakehouseResource], _Built]) -> IncrementalSource:
    """A cloudFiles flow run as a bronze table: rebuilt as its schema evolves, skipped with nothing new."""
    first = build(lakehouse)
    source = landing_source(lambda: lakehouse.spark_session, first.run.loaders[0], dg.get_dagster_logger())
    pending = [first.frame]

    def frame() -> DataFrame:
        return pending.pop() if pending else build(lakehouse).frame

    return dataclasses.replace(source, build=frame)


def _landing_folder(read: FileRead, project: PipelineProject, settings: LakehouseSettings) -> LandingFolder:
    """The landing folder a flow reads files from, for its sensor and ``lakehouse verify``."""
    landed = landed_path(read.path, project, settings, read.location)
    options = {k.removeprefix("cloudFiles.").lower(): str(v).lower() for k, v in read.options.items()}
    return LandingFolder(landed.source, read.format, streamed=read.streamed, header=options.get("header") == "true",
                         multi_line=options.get("multiline") == "true", pattern=landed.pattern)


def _code_reference(dataset: PipelineDataset) -> dg.CodeReferencesMetadataValue:
    """Where the dataset is defined, for the UI's code link."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)  # code references are beta in Dagster 1.13
        return dg.CodeReferencesMetadataValue(code_references=[dg.LocalFileCodeReference(
            file_path=str(dataset.location.file), line_number=dataset.location.line or 1,
            label=f"{dataset.kind} {dataset.table}")])


def _rule(dataset: PipelineDataset, declared: SqlConstraint) -> Rule:
    try:
        return expectation(dataclasses.replace(declared, name=check_name(declared.name)))
    except SqlDefinitionError as exc:
        raise PipelineError(f"{dataset.location}: {dataset.table}: expectation {declared.name!r}: {exc}") from exc


def _columns(dataset: PipelineDataset) -> Sequence[DescribedColumn]:
    """The columns the dataset's ``schema`` declares, with their types and comments."""
    schema = dataset.schema
    if schema is None:
        return ()
    if isinstance(schema, str):
        try:
            parsed = spark_type(f"STRUCT<{schema}>")
        except UnknownTypeError as exc:
            raise PipelineError(f"{dataset.location}: {dataset.table}: its schema {schema!r} is not a list of "
                                f"Spark SQL columns (name TYPE, ...): {exc}") from exc
        assert isinstance(parsed, StructType)
        schema = parsed
    return [DescribedColumn(f.name, str(f.metadata.get("comment", "")), type_sql(f.dataType)) for f in schema.fields]
