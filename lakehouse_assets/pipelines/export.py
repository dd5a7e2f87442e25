"""The project's asset graph as a Spark Declarative Pipelines project (``lakehouse export-sdp``):
``spark-pipeline.yml`` and one file per table under ``transformations/``, for pyspark's own
``spark-pipelines run``. What open-source SDP can express is exported; every table left out
is listed with why, never skipped silently (docs/guides/lakeflow.md). Nothing here starts
Spark: the definitions, their metadata and the Delta logs (delta-rs) say it all.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import dagster as dg
from pyspark.sql.types import StructType

import lakehouse_assets
from lakehouse_assets.assets.discovery import ingests_landed_files, table_specs
from lakehouse_assets.assets.landing import streamed_folder
from lakehouse_assets.assets.sql_asset import SQL_FILE, SQL_TEXT
from lakehouse_assets.ingestion.columns import (
    INGESTED_AT_COLUMN,
    METADATA_COLUMNS,
    RESCUED_DATA_COLUMN,
    SOURCE_FILE_COLUMN,
    SOURCE_LINE_COLUMN,
)
from lakehouse_assets.pipelines import export_files as files
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark_conf import DELTA_CONF, REQUIRED_STATIC_CONF, delta_jars, engine_conf
from lakehouse_assets.spec import LANDING_FOLDERS, TableSpec
from lakehouse_assets.storage import type_sql
from lakehouse_assets.storage.discovery import is_table
from lakehouse_assets.storage.merge import sql_literal
from lakehouse_assets.tables.sql_definition import OnViolation, SqlTableKind, parse_sql_definition
from lakehouse_assets.tables.sql_refs import batch_query

STREAMING_TABLE = "streaming table"
MATERIALIZED_VIEW = "materialized view"
SPEC_FILE = "spark-pipeline.yml"
# The flows' session settings: SQL settings only (a flow sets them on its session and refuses
# static ones), Delta's catalog included.
_FLOW_CONF_KEYS = ("spark.sql.", "spark.databricks.delta.")
# DataFrame methods Spark Connect's planner resolves against their input as it plans them.
_UNPLANNABLE = ("withWatermark", "dropDuplicates", "dropDuplicatesWithinWatermark")
# The ingestion's own columns on a bronze table, as a flow over Spark's file source fills them.
_INGESTION_COLUMNS = {RESCUED_DATA_COLUMN: 'F.lit(None).cast("string")',
                      SOURCE_FILE_COLUMN: 'F.col("_metadata.file_path")',
                      SOURCE_LINE_COLUMN: 'F.lit(None).cast("bigint")',
                      INGESTED_AT_COLUMN: "F.current_timestamp()"}
# Static settings: the command line's, and no more of them than spark-pipelines keeps (pyspark
# 4.2 passes them to its Connect server in chunks of ten and keeps the last chunk only; six
# are its own, and --jars counts twice).
_STATIC_CONF = {"spark.sql.extensions": DELTA_CONF["spark.sql.extensions"], "spark.sql.catalogImplementation": "hive"}
# Static SQL settings of the lakehouse's driver, which a flow cannot set (CANNOT_MODIFY_STATIC_CONFIG).
_STATIC_SQL_CONF = ("spark.sql.codegen.cache.maxEntries", *REQUIRED_STATIC_CONF)


@dataclass(frozen=True)
class Exported:
    """A table the SDP project defines: as what, in which file, and what differs."""

    table: str
    kind: str
    file: str
    note: str = ""


@dataclass(frozen=True)
class LeftOut:
    """A table the SDP project does not define, and why."""

    table: str
    reason: str


@dataclass
class SdpExport:
    """An SDP project, ready to write: its files by path in the folder, and the report."""

    folder: Path
    files: dict[str, str] = field(default_factory=dict)
    exported: list[Exported] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)


def spark_pipelines_command(settings: LakehouseSettings, spec: Path | str = SPEC_FILE) -> list[str]:
    """``spark-pipelines run`` with Delta Lake's jars and the static settings SDP needs."""
    jars = ",".join(str(path) for path in delta_jars(settings.delta_jars))
    # The one beside this interpreter (the project's environment), else whichever is on PATH.
    beside = Path(sys.executable).parent / "spark-pipelines"
    argv = [str(beside) if beside.is_file() else "spark-pipelines", "--jars", jars]
    for key, value in _STATIC_CONF.items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, "run", "--spec", str(spec)]


def plan_export(folder: Path, assets: Iterable[Any], packages: Sequence[ModuleType],
                settings: LakehouseSettings) -> SdpExport:
    """The SDP project of ``assets`` (the project's definitions), whose Python tables are
    found by name in the modules of ``packages``, to be written in ``folder``."""
    assets = [a for a in assets if isinstance(a, dg.AssetsDefinition)]
    specs = table_specs(assets)
    owners = {table: asset for asset in assets for table in table_specs([asset])}
    names = _module_names(packages)
    decisions = {table: _reason_left_out(spec.metadata) for table, spec in specs.items()}
    exported = {table for table, reason in decisions.items() if reason is None}
    while True:
        # A table left out changes how its readers read it (by path), or leaves them out too:
        # again until no exported table turns out to be left out.
        export = SdpExport(folder.resolve())
        for table in sorted(specs):
            reason = decisions[table] or _export_table(export, table, specs[table], owners[table], names, exported,
                                                       settings)
            if reason is not None:
                export.left_out.append(LeftOut(table, reason))
        newly_left_out = exported & {o.table for o in export.left_out}
        if not newly_left_out:
            break
        exported -= newly_left_out
    schemas = sorted({e.table.split(".")[0] for e in export.exported})
    export.files["transformations/_schemas.py"] = files.schemas_file(schemas)
    export.files[SPEC_FILE] = files.spec_file(folder=export.folder, configuration=_configuration(settings))
    command = spark_pipelines_command(settings)
    # The flows import the project and its asset packages: this interpreter, this project, and
    # the PYTHONPATH the export ran with.
    python_path = os.pathsep.join(p for p in (str(Path(lakehouse_assets.__file__).resolve().parents[1]),
                                              os.environ.get("PYTHONPATH", "")) if p)
    export.files["run.sh"] = files.run_script(command, {"PYSPARK_PYTHON": f"${{PYSPARK_PYTHON:-{sys.executable}}}",
                                                        "PYTHONPATH": f"{python_path}:${{PYTHONPATH:-}}"})
    export.files["README.md"] = files.readme(
        exported=[(e.table, e.kind, e.file, e.note) for e in export.exported],
        left_out=[(o.table, o.reason) for o in export.left_out], command=command)
    return export


def write_export(export: SdpExport) -> list[Path]:
    """Write the project's files (the folder is created if need be); the paths written."""
    written = []
    for relative, text in sorted(export.files.items()):
        path = export.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if relative.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    return written


def _configuration(settings: LakehouseSettings) -> dict[str, str]:
    """The spec's settings: the lakehouse driver's SQL settings (with Spark's 200 shuffle
    partitions the reference export ran twice as long), none static: each flow sets them."""
    conf = {k: v for k, v in engine_conf(settings).items()
            if k.startswith(_FLOW_CONF_KEYS) and k not in _STATIC_CONF and k not in _STATIC_SQL_CONF}
    return {files.LANDING_CONF: str(settings.root / "landing"), files.ROOT_CONF: str(settings.root), **conf,
            "spark.sql.sources.default": "delta"}


def _reason_left_out(metadata: Mapping[str, Any]) -> str | None:
    """Why a table cannot be a dataset at all, from its declaration alone."""
    spec = TableSpec.of(metadata)
    assert spec is not None  # the metadata of a table asset
    if spec.pipeline:
        return f"loaded from the SDP pipeline {spec.pipeline!r}, whose folder is an SDP project already"
    if spec.quarantine_for:
        return (f"the quarantine of {spec.quarantine_for}: OSS SDP has no expect_or_drop and no second "
                "output of a flow, so the rows its rules refuse are filtered out, not kept")
    if spec.auto_cdc is not None:
        return "an AUTO CDC table: OSS SDP has no AUTO CDC (create_auto_cdc_flow and its SQL are Databricks' own)"
    return None


def _export_table(export: SdpExport, table: str, spec: dg.AssetSpec, asset: dg.AssetsDefinition,
                  names: Mapping[dg.AssetKey, tuple[str, str]], exported: set[str],
                  settings: LakehouseSettings) -> str | None:
    """Add ``table``'s file to ``export``; None, or why it is left out."""
    if ingests_landed_files(spec):
        return _export_bronze(export, table, spec, settings)
    if SQL_TEXT in spec.metadata:
        return _export_sql(export, table, spec, exported)
    return _export_python(export, table, spec, asset, names, exported, settings)


def _export_bronze(export: SdpExport, table: str, spec: dg.AssetSpec, settings: LakehouseSettings) -> str | None:
    source = cast(str, streamed_folder(spec.metadata))
    folder = spec.metadata[LANDING_FOLDERS][source]
    if not settings.landing_path(source).is_dir():
        return (f"nothing has landed in landing/{source} yet, and Spark's file source refuses a folder that does "
                "not exist; land files, then export again")
    schema = stored_schema(settings, table) or {
        k: v for k, v in _declared(spec).column_types.items() if k not in METADATA_COLUMNS}
    if not schema:
        return ("its schema is not known yet: it declares no column types and has no table; materialize it once "
                "(or declare its columns), then export again")
    options = {k: "true" for k, on in (("header", folder.get("header")), ("multiLine", folder.get("multi_line"))) if on}
    path = f"transformations/{table}.py"
    export.files[path] = files.bronze_file(
        table=table, description=spec.description or table, source=source, file_format=folder["format"],
        schema=", ".join(f"`{c}` {t}" for c, t in schema.items()), options=options,
        metadata_columns=_INGESTION_COLUMNS)
    export.exported.append(Exported(table, STREAMING_TABLE, path, "Spark's own file source; "
                                    f"{RESCUED_DATA_COLUMN} and {SOURCE_LINE_COLUMN} are NULL."))
    return None


def stored_schema(settings: LakehouseSettings, table: str) -> dict[str, str]:
    """The table's columns and Spark SQL types in its Delta log, the ingestion's aside; empty when none."""
    schema = _table_schema(settings, table)
    return {f.name: type_sql(f.dataType) for f in schema.fields if f.name not in METADATA_COLUMNS} if schema else {}


def _table_schema(settings: LakehouseSettings, table: str) -> StructType | None:
    """The schema of the lakehouse's ``table`` as its Delta log has it; None when never built."""
    from lakehouse_assets.storage.delta_rs_snapshot import open_delta_table, spark_schema

    if not _has_table(settings, table):
        return None
    return spark_schema(open_delta_table(settings.table_path(*table.split("."))))


def _column_types(settings: LakehouseSettings, table: str, spec: dg.AssetSpec) -> dict[str, str]:
    """The declared types a flow casts to, of the columns the table has (a flow cannot ask its rows')."""
    declared = dict(_declared(spec).column_types)
    schema = _table_schema(settings, table)
    return {c: t for c, t in declared.items() if c in schema.fieldNames()} if schema else declared


def _declared(spec: dg.AssetSpec) -> TableSpec:
    declared = TableSpec.of(spec.metadata)
    assert declared is not None  # found by table_specs
    return declared


def _has_table(settings: LakehouseSettings, table: str) -> bool:
    return is_table(settings.table_path(*table.split(".")))


def _export_sql(export: SdpExport, table: str, spec: dg.AssetSpec, exported: set[str]) -> str | None:
    sql_path = Path(str(getattr(spec.metadata.get(SQL_FILE), "path", "")))
    definition = parse_sql_definition(sql_path.read_text(encoding="utf-8"), source=str(sql_path))
    enforced = [c.name for c in definition.constraints if c.on_violation is not OnViolation.warn]
    if enforced:
        return (f"its expectations {enforced} drop rows or fail the update, and OSS SDP has no CONSTRAINT ... "
                "EXPECT; exporting its query alone would keep rows the lakehouse refuses")
    missing = [t for t, _ in definition.reads if t not in exported]
    if missing:
        return f"its SQL reads {missing}, which are not exported (see their reasons)"
    notes = [f"{sql_path.name}'s expectations {[c.name for c in definition.constraints]} (warn only) are not "
             "declared: OSS SDP has no CONSTRAINT ... EXPECT."] if definition.constraints else []
    query, kind = definition.query, SqlTableKind(definition.kind).value
    if definition.complete:
        query, kind = batch_query(query), "MATERIALIZED VIEW"
        notes.append("A streaming table grouping at its top level in the lakehouse: a materialized view here, "
                     "since OSS SDP streams append only.")
    path = f"transformations/{table}.sql"
    comment = sql_literal(definition.comment) if definition.comment else None
    export.files[path] = files.sql_file(table=table, kind=kind, comment=comment, query=query, notes=notes)
    export.exported.append(Exported(table, kind.lower(), path, " ".join(notes)))
    return None


def _export_python(export: SdpExport, table: str, spec: dg.AssetSpec, asset: dg.AssetsDefinition,
                   names: Mapping[dg.AssetKey, tuple[str, str]], exported: set[str],
                   settings: LakehouseSettings) -> str | None:
    if spec.key not in names:
        return "defined outside the asset packages' modules (not a top-level name a flow can import)"
    module, attribute = names[spec.key]
    fn = getattr(cast(Any, asset.op.compute_fn).decorated_fn, "__wrapped__", None)
    if fn is None:
        return "not declared with table_asset or routed_table_asset: its transformation cannot be called alone"
    by_input = {name: ".".join(key.path) for name, key in asset.keys_by_input_name.items()}
    needs = [p for p in inspect.signature(fn).parameters if p not in by_input]
    if needs:
        return (f"its transformation takes {needs}, not only its input tables: an SDP flow is given no resources "
                "(it reads what it needs itself); a flow reading it reads the lakehouse's own table")
    unplannable = _unplannable_calls(fn)
    if unplannable:
        return (f"its transformation calls {unplannable}, which Spark Connect's planner analyzes as the flow "
                "registers, before the datasets it reads exist: SDP refuses the flow (TABLE_OR_VIEW_NOT_FOUND)")
    absent = [u for u in by_input.values() if u not in exported and not _has_table(settings, u)]
    if absent:
        return f"it reads {absent}, which neither the export nor the lakehouse has (not exported, never built)"
    declared = _declared(spec)
    streams = set(declared.streams_from)
    streaming = bool(streams) and declared.output_mode == "append"
    inputs = {}
    for parameter, upstream in by_input.items():
        streamed = streaming and upstream in streams
        options = declared.options_of(upstream).reader_options() if streamed else {}
        schema = _table_schema(settings, upstream) if not options else None
        inputs[parameter] = files.read_expression(upstream, streamed=streamed, exported=upstream in exported,
                                                  options=options, schema_json=schema.json() if schema else None)
    notes = [f"{u} is read from the lakehouse's own Delta table: it is not exported."
             for u in by_input.values() if u not in exported]
    if declared.quarantine:
        notes.append("A routed table: only its passing rows (its routing rules as a filter; a recording landed "
                     "twice is kept twice, since dropDuplicates cannot be planned in an SDP flow); "
                     f"{declared.quarantine} is not exported.")
    if streams and not streaming:
        notes.append(f"Kept in {declared.output_mode} mode in the lakehouse: a materialized view here, "
                     "recomputed whole from its inputs read in batch.")
    path = f"transformations/{table}.py"
    export.files[path] = files.python_file(
        table=table, description=spec.description or table, streaming=streaming, module=module, attribute=attribute,
        inputs=inputs, column_types=_column_types(settings, table, spec), note=" ".join(notes))
    export.exported.append(Exported(table, STREAMING_TABLE if streaming else MATERIALIZED_VIEW, path, " ".join(notes)))
    return None


def _unplannable_calls(fn: Any) -> list[str]:
    """The DataFrame methods ``fn`` calls that an SDP flow cannot register over a pipeline's dataset."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return []
    return sorted({m for m in _UNPLANNABLE if f".{m}(" in source})


def _module_names(packages: Sequence[ModuleType]) -> dict[dg.AssetKey, tuple[str, str]]:
    """The key of each asset defined at the top level of a module of ``packages``: its module and name."""
    import importlib
    import pkgutil

    found: dict[dg.AssetKey, tuple[str, str]] = {}
    for package in packages:
        modules = [package, *(importlib.import_module(info.name)
                              for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."))]
        for module in modules:
            for attribute, value in vars(module).items():
                if isinstance(value, dg.AssetsDefinition):
                    for key in value.keys:
                        found.setdefault(key, (module.__name__, attribute))
    return found
