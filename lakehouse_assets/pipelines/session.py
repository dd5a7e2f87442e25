"""The ``spark`` a pipeline's code sees, as ``spark-pipelines`` gives its files one. While the
files load it answers only ``spark.conf.get`` (the spec's ``configuration``); in a run it is
the run's own session, with the pipeline's ways of reading: names resolved as the pipeline's,
temporary views inlined, ``cloudFiles`` as the lakehouse's Auto Loader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakehouse_assets.ingestion import AutoLoader, AutoLoaderOptions
from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN
from lakehouse_assets.pipelines.graph import PipelineDataset
from lakehouse_assets.pipelines.landing_paths import auto_loader_defaults, landed_path
from lakehouse_assets.pipelines.spec import PipelineError, PipelineProject
from lakehouse_assets.settings import LANDING_DIR, LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore, type_sql

CLOUD_FILES = "cloudfiles"
# The readers' methods taking a path to files.
_FILE_READS = frozenset({"json", "csv", "parquet", "text", "orc"})


@dataclass
class PipelineRun:
    """One flow being built in a run: the session, the table it fills, the pipeline's views, its Auto Loaders."""

    spark: SparkSession
    table: str
    views: Mapping[str, PipelineDataset]
    settings: LakehouseSettings
    session: PipelineSession
    store: DeltaTableStore
    loaders: list[AutoLoader] = field(default_factory=list)


_RUN: ContextVar[PipelineRun | None] = ContextVar("lakehouse_pipeline_run", default=None)


@contextmanager
def running(run: PipelineRun) -> Iterator[PipelineRun]:
    """Make ``run`` what every pipeline session of this context reads through."""
    token = _RUN.set(run)
    try:
        yield run
    finally:
        _RUN.reset(token)


def active_run(what: str) -> PipelineRun:
    """The run building a flow; ``what`` the pipeline's code asked for, for the message."""
    run = _RUN.get()
    if run is None:
        raise PipelineError(
            f"a pipeline's code asked for {what} outside a run: a pipeline file may not read data while it "
            "is loaded (only spark.conf.get); read inside the function of a dataset")
    return run


def lakehouse_configuration(settings: LakehouseSettings) -> dict[str, str]:
    """What the lakehouse adds to every pipeline's configuration: ``lakehouse.root`` and ``lakehouse.landing``."""
    return {"lakehouse.root": str(settings.root), "lakehouse.landing": str(settings.root / LANDING_DIR)}


class PipelineConf:
    """``spark.conf``: the spec's configuration, then the lakehouse's, then the session's settings."""

    def __init__(self, project: PipelineProject, settings: LakehouseSettings) -> None:
        self._project = project
        self._settings = settings

    def get(self, key: str, default: Any = ...) -> Any:
        """The pipeline's setting ``key`` (SDP hands the spec's configuration to the session)."""
        if key in self._project.configuration:
            return self._project.configuration[key]
        run = _RUN.get()
        lakehouse = lakehouse_configuration(run.settings if run is not None else self._settings)
        if key in lakehouse:
            return lakehouse[key]
        if run is not None:
            return run.spark.conf.get(key) if default is ... else run.spark.conf.get(key, default)
        if default is not ...:
            return default
        raise PipelineError(f"{self._project.spec_file}: the pipeline's code reads spark.conf.get({key!r}), which "
                            "its configuration does not set; add it under configuration:")

    def __getattr__(self, name: str) -> Any:
        return getattr(active_run(f"spark.conf.{name}").spark.conf, name)


class PipelineReader:
    """``spark.read`` / ``readStream``: calls recorded, played on the session's reader by a terminal call."""

    def __init__(self, session: PipelineSession, streaming: bool) -> None:
        self._session = session
        self._streaming = streaming
        self._format: str | None = None
        self._options: dict[str, Any] = {}
        self._schema: StructType | str | None = None

    def format(self, source: str) -> PipelineReader:
        self._format = source
        return self

    def option(self, key: str, value: Any) -> PipelineReader:
        self._options[key] = value
        return self

    def options(self, **options: Any) -> PipelineReader:
        self._options.update(options)
        return self

    def schema(self, schema: StructType | str) -> PipelineReader:
        self._schema = schema
        return self

    def table(self, name: str) -> DataFrame:
        """The dataset or table ``name`` as the pipeline names it."""
        return self._session.read_dataset(name, self._streaming, self._options)

    def load(self, path: str | None = None, format: str | None = None, **options: Any) -> DataFrame:
        self._format = format or self._format
        self._options.update(options)
        if (self._format or "").lower() == CLOUD_FILES:
            if not self._streaming or path is None:
                raise PipelineError("cloudFiles is read with spark.readStream.format('cloudFiles')...load(path)")
            fmt = next((str(v) for k, v in self._options.items() if k.lower() == "cloudfiles.format"), "")
            given = {k: v for k, v in self._options.items() if k.lower() not in ("cloudfiles.format", "format")}
            return self._session.auto_loader(path, fmt, auto_loader_defaults(fmt, given), self._schema)
        reader = self._reader()
        frame: DataFrame = reader.load(self._session.landed(path)) if path is not None else reader.load()
        return frame

    def _reader(self) -> Any:
        spark = active_run("spark.read").spark
        reader: Any = spark.readStream if self._streaming else spark.read
        if self._format:
            reader = reader.format(self._format)
        if self._schema is not None:
            reader = reader.schema(self._schema)
        return reader.options(**{k: str(v) for k, v in self._options.items()})

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # json(path), csv(path), parquet(path), ...: the session's reader with what was recorded,
        # reading the path where it lands.
        read = getattr(self._reader(), name)
        if name not in _FILE_READS:
            return read  # type: ignore[no-any-return]

        def landed(path: str, *args: Any, **kwargs: Any) -> DataFrame:
            frame: DataFrame = read(self._session.landed(path), *args, **kwargs)
            return frame

        return landed


class PipelineSession:
    """The ``spark`` global of a pipeline's Python files, loaded for the lakehouse ``settings``."""

    def __init__(self, project: PipelineProject, settings: LakehouseSettings) -> None:
        self._project = project
        self.conf = PipelineConf(project, settings)

    @property
    def read(self) -> PipelineReader:
        return PipelineReader(self, streaming=False)

    @property
    def readStream(self) -> PipelineReader:  # noqa: N802 (pyspark's name)
        return PipelineReader(self, streaming=True)

    def table(self, name: str) -> DataFrame:
        """``spark.table(name)``: the dataset as it stands."""
        return self.read_dataset(name, streaming=False)

    def sql(self, query: str, args: Any = None, **frames: Any) -> DataFrame:
        """``spark.sql(query)`` in a flow, run as a SQL file's query; with ``args`` or DataFrames, the session's own."""
        run = active_run("spark.sql")
        if args is not None or frames:
            frame: DataFrame = run.spark.sql(query, args, **frames)
            return frame
        from lakehouse_assets.pipelines.sql_query import sql_flow  # SQL flows build on this module

        flow: DataFrame = sql_flow(query, self._project, Path("<spark.sql>"))()
        return flow

    def landed(self, path: str) -> str:
        """Where the files at ``path`` land in the run's lakehouse, as Spark reads them (:func:`landed_path`)."""
        return landed_path(path, self._project, active_run(f"files at {path}").settings).spark_path

    def read_dataset(self, name: str, streaming: bool, options: Mapping[str, Any] | None = None) -> DataFrame:
        """The dataset ``name`` as the pipeline names it: a view's DataFrame, else the table, or its stream."""
        run = active_run(f"the table {name}")
        table = self._project.qualified(name)
        view = run.views.get(table)
        if view is not None:
            with running(run):
                frame: DataFrame = view.flow.func()
                return frame
        reader: Any = run.spark.readStream if streaming else run.spark.read
        return reader.options(**{k: str(v) for k, v in (options or {}).items()}).table(table)  # type: ignore[no-any-return]

    def auto_loader(self, path: str, fmt: str, options: Mapping[str, Any],
                    schema: StructType | str | None) -> DataFrame:
        """``cloudFiles`` of ``fmt`` files at ``path``: the lakehouse's Auto Loader, kept as the table's own."""
        run = active_run(f"cloudFiles at {path}")
        # The lakehouse keeps the table's schema where it keeps every table's.
        given = {k: v for k, v in options.items() if k.lower() != "cloudfiles.schemalocation"}
        given["cloudFiles.format"] = fmt
        if schema is not None:
            # A schema given to Auto Loader fixes its columns' types: the same as hinting every one.
            ddl = schema if isinstance(schema, str) else ", ".join(
                f"`{f.name}` {type_sql(f.dataType)}" for f in schema.fields)
            given["cloudFiles.schemaHints"] = ddl
        layer, name = run.table.split(".")
        landed = landed_path(path, self._project, run.settings)
        loader = AutoLoader(source_dir=landed.folder,
                            options=replace(AutoLoaderOptions.from_options(given), path_pattern=landed.pattern),
                            schema_location=run.settings.schema_path(layer, name),
                            tables=(str(run.settings.table_path(layer, name)),), store=run.store)
        run.loaders.append(loader)
        frame = loader.stream(run.spark)
        return with_file_metadata(frame, loader, run.spark) if self._reads_file_metadata else frame

    @cached_property
    def _reads_file_metadata(self) -> bool:
        """Whether the pipeline's code names ``_metadata`` (the files' columns)."""
        return any(FILE_METADATA in path.read_text(encoding="utf-8") for path in self._project.files)

    def __getattr__(self, name: str) -> Any:
        return getattr(active_run(f"spark.{name}").spark, name)


#: Spark's hidden column of the file a row comes from (``file_path``, ``file_name``, ...).
FILE_METADATA = "_metadata"


def with_file_metadata(frame: DataFrame, loader: AutoLoader, spark: SparkSession) -> DataFrame:
    """An Auto Loader stream with Spark's ``_metadata`` column of each row's file, as Databricks'
    Auto Loader has it: the files listed now, joined by path (the stream's ``_source_file``)."""
    files = [(f.path, f.relative_path.rsplit("/", 1)[-1], f.size, f.modification_time)
             for f in loader.options.landed_files(loader.source_dir)]
    listed = spark.createDataFrame(files, "path STRING, name STRING, size BIGINT, mtime TIMESTAMP")
    joined = frame.join(F.broadcast(listed), frame[SOURCE_FILE_COLUMN] == listed["path"], "left")
    metadata = F.struct(
        frame[SOURCE_FILE_COLUMN].alias("file_path"),
        F.coalesce(listed["name"], F.regexp_extract(frame[SOURCE_FILE_COLUMN], "[^/]+$", 0)).alias("file_name"),
        listed["size"].alias("file_size"), listed["mtime"].alias("file_modification_time"))
    return joined.select(*[frame[c] for c in frame.columns], metadata.alias(FILE_METADATA))
