"""The schema a table's ingestion reads with: inferred once, stored, versioned, evolved.

Like Auto Loader's ``cloudFiles.schemaLocation``, the first run infers the schema from the
files present and writes it to ``<schema location>/_schemas/0``; later runs read the newest
version instead of inferring again, so a restart reads exactly as the run before it did.
Each change (new columns, changed schema hints) writes the next version, ``1``, ``2``, ...,
as a small JSON document holding the Spark schema, the options it was inferred with, and why
it changed. Versions are never rewritten.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse_assets.ingestion.columns import METADATA_COLUMNS
from lakehouse_assets.ingestion.errors import (
    IngestionOptionsError,
    NothingToInferError,
    StoredSchemaError,
)
from lakehouse_assets.ingestion.options import AutoLoaderOptions
from lakehouse_assets.ingestion.readiness import hold_back
from lakehouse_assets.ingestion.records import FIELDS, file_reader, json_options, read_batch_records
from lakehouse_assets.location import ObjectStore, locate

# Auto Loader keeps a stream's schema versions in this folder of its schema location.
SCHEMA_VERSIONS_FOLDER = "_schemas"
_CORRUPT = "_lakehouse_corrupt_record"
# Types tried, narrowest first, when inferring the type of CSV text values.
_CSV_CANDIDATE_TYPES: Sequence[T.DataType] = (T.LongType(), T.DoubleType(), T.BooleanType(), T.TimestampType())


@dataclass(frozen=True)
class StoredSchema:
    """One version of a stored schema."""

    version: int
    schema: T.StructType
    inferred_with: Mapping[str, Any]
    schema_hints: str | None
    reason: str
    created_at: dt.datetime
    files: tuple[str, ...] = field(default=())

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "schema": self.schema.jsonValue(),
                "ddl": ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in self.schema.fields),
                "inferredWith": dict(self.inferred_with),
                "schemaHints": self.schema_hints,
                "reason": self.reason,
                "createdAt": self.created_at.isoformat(),
                "files": list(self.files),
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str) -> StoredSchema:
        doc = json.loads(text)
        return cls(
            version=int(doc["version"]),
            schema=T.StructType.fromJson(doc["schema"]),
            inferred_with=doc.get("inferredWith") or {},
            schema_hints=doc.get("schemaHints"),
            reason=doc.get("reason", ""),
            created_at=dt.datetime.fromisoformat(doc["createdAt"]),
            files=tuple(doc.get("files") or ()),
        )


class SchemaStore:
    """The versions of one table's stored schema under ``location`` (a :class:`Location`, on a
    local disk or a store, or a local folder)."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        self.location = str(location)
        self.folder = locate(location) / SCHEMA_VERSIONS_FOLDER

    def versions(self) -> list[int]:
        """The stored versions, oldest first."""
        return sorted(int(name) for name in self.folder.names() if name.isdigit())

    def read(self, version: int) -> StoredSchema:
        file = self.folder / str(version)
        try:
            return StoredSchema.from_json(file.read_text())
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoredSchemaError(
                f"Stored schema {file.path} cannot be read ({exc}). Restore it from a backup, or delete "
                f"{self.folder.path} and full-refresh the table to infer the schema again."
            ) from exc

    def latest(self) -> StoredSchema | None:
        versions = self.versions()
        return self.read(versions[-1]) if versions else None

    def add(
        self,
        schema: T.StructType,
        *,
        inferred_with: Mapping[str, Any],
        schema_hints: str | None,
        reason: str,
        files: Sequence[str] = (),
    ) -> StoredSchema:
        """Store ``schema`` as the next version. When another run stored that version first,
        its schema wins and is returned: both inferred from the same folder."""
        versions = self.versions()
        stored = StoredSchema(
            version=versions[-1] + 1 if versions else 0,
            schema=schema,
            inferred_with=dict(inferred_with),
            schema_hints=schema_hints,
            reason=reason,
            created_at=dt.datetime.now(dt.UTC),
            files=tuple(files[:100]),
        )
        # Of two writers of the same version exactly one succeeds.
        if not (self.folder / str(stored.version)).create_text(stored.to_json()):
            return self.read(stored.version)
        return stored


# -- schema hints ----------------------------------------------------------------------------------
def parse_schema_hints(hints: str) -> T.StructType:
    """Schema hints in DDL (``"time DOUBLE, mrn BIGINT"``) as a struct."""
    try:
        # A column list ("name TYPE, ...") parses as a struct; fromDDL is typed as any DataType.
        parsed = cast(T.StructType, T.StructType.fromDDL(hints))
    except (PySparkException, ValueError) as exc:
        raise IngestionOptionsError(
            f"Schema hints {hints!r} are not valid DDL ({exc}). Write them as 'name TYPE, name TYPE' "
            "for top-level columns, e.g. 'time DOUBLE, mrn BIGINT'."
        ) from exc
    reserved = [f.name for f in parsed.fields if f.name in METADATA_COLUMNS]
    if reserved:
        raise IngestionOptionsError(f"Schema hints cannot type the metadata columns {reserved}")
    return parsed


def apply_schema_hints(schema: T.StructType, hints: str | None) -> T.StructType:
    """``schema`` with the hinted columns' types replaced (names matched case-insensitively)
    and hinted columns it lacks appended."""
    if not hints:
        return schema
    hinted = {f.name.lower(): f for f in parse_schema_hints(hints).fields}
    fields = [
        T.StructField(f.name, hinted[f.name.lower()].dataType, True) if f.name.lower() in hinted else f
        for f in schema.fields
    ]
    present = {f.name.lower() for f in schema.fields}
    fields += [T.StructField(h.name, h.dataType, True) for key, h in hinted.items() if key not in present]
    return T.StructType(fields)


# -- inference ---------------------------------------------------------------------------------------
def infer_schema(spark: SparkSession, paths: Sequence[str] | str, options: AutoLoaderOptions, *,
                 store: ObjectStore) -> T.StructType:
    """The schema of the files at ``paths`` (or of all data files in a folder, given as one
    string; on object storage reached through ``store``), as ``options`` would read them, before hints.

    JSON and Parquet use Spark's own inference. CSV files are read by their own headers, each
    column typed (with ``infer_column_types``) as the narrowest of bigint, double, boolean and
    timestamp that all its values parse as. Otherwise every JSON/CSV column is a string.
    """
    if not paths:
        return T.StructType([])
    # One folder is listed once; a list of paths is listed path by path (and, past 32 paths,
    # by a Spark job unless spark.sql.sources.parallelPartitionDiscovery.threshold is raised).
    load = paths if isinstance(paths, str) else list(paths)
    with _case_sensitive(spark) as session:
        if options.format == "parquet":
            inferred = file_reader(session, options, streaming=False).option("mergeSchema", "true").load(load).schema
        elif options.format == "json":
            reader = file_reader(session, options, streaming=False).format("json")
            reader = reader.option("columnNameOfCorruptRecord", _CORRUPT).option("wholetext", "false")
            reader = reader.option("multiLine", str(options.multi_line).lower())
            for key, value in json_options(options).items():
                reader = reader.option(key, value)
            inferred = reader.load(load).schema
            if not options.infer_column_types:
                inferred = _all_strings(inferred)
        else:
            inferred = _infer_csv(read_batch_records(session, load, options, store), options.infer_column_types)
    return _storable(inferred)


@contextmanager
def _case_sensitive(spark: SparkSession) -> Iterator[SparkSession]:
    """The caller's session made case-sensitive while inference runs (a Connect session cannot
    make a sibling), so that fields differing only by case ("time", "Time") do not fail it."""
    # The setting has a default, so it always reads as a string.
    before = cast(str, spark.conf.get("spark.sql.caseSensitive"))
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.caseSensitive", before)


def _infer_csv(records: DataFrame, infer_types: bool) -> T.StructType:
    positions = (
        records.select(F.posexplode(F.map_keys(F.col(FIELDS))).alias("position", "name"))
        .groupBy("name")
        .agg(F.min("position").alias("position"))
        .orderBy("position", "name")
        .collect()
    )
    names = [row["name"] for row in positions]
    if not names or not infer_types:
        return T.StructType([T.StructField(n, T.StringType(), True) for n in names])
    checks = []
    for i, name in enumerate(names):
        value = F.try_element_at(F.col(FIELDS), F.lit(name))
        checks.append(F.count(value).alias(f"n{i}"))
        for j, candidate in enumerate(_CSV_CANDIDATE_TYPES):
            checks.append(F.bool_and(value.isNull() | value.try_cast(candidate).isNotNull()).alias(f"c{i}_{j}"))
    # An aggregate without grouping has exactly one row.
    result = cast(Row, records.agg(*checks).first())
    fields = []
    for i, name in enumerate(names):
        # The narrowest type all its values parse as; string for a column with no values.
        fits = [c for j, c in enumerate(_CSV_CANDIDATE_TYPES) if result[f"n{i}"] and result[f"c{i}_{j}"]]
        fields.append(T.StructField(name, fits[0] if fits else T.StringType(), True))
    return T.StructType(fields)


def _all_strings(schema: T.StructType) -> T.StructType:
    return T.StructType([T.StructField(f.name, T.StringType(), True) for f in schema.fields])


def _storable(schema: T.StructType) -> T.StructType:
    """Without the corrupt-record and metadata columns, with all-null columns as strings, and
    with one column per name ignoring case: of ``time`` and ``Time``, the all-lowercase one is
    kept, else the first (the other's values are rescued when read)."""
    chosen: dict[str, T.StructField] = {}
    for f in schema.fields:
        if f.name == _CORRUPT or f.name in METADATA_COLUMNS:
            continue
        key = f.name.lower()
        if key not in chosen or (f.name == key and chosen[key].name != key):
            chosen[key] = f
    return T.StructType(
        [
            T.StructField(f.name, T.StringType() if isinstance(f.dataType, T.NullType) else f.dataType, True)
            for f in schema.fields
            if chosen.get(f.name.lower()) is f
        ]
    )


def new_columns(schema: T.StructType, candidates: T.StructType) -> T.StructType:
    """The columns of ``candidates`` that ``schema`` lacks (compared case-insensitively)."""
    present = {f.name.lower() for f in schema.fields}
    return T.StructType([f for f in candidates.fields if f.name.lower() not in present])


# -- the schema a run reads with -----------------------------------------------------------------------
def resolve_schema(
    spark: SparkSession, source_dir: str | os.PathLike[str], options: AutoLoaderOptions, store: SchemaStore
) -> StoredSchema:
    """The schema to read ``source_dir`` with: the newest stored version, or, on the first
    run, one inferred from up to ``schema_inference_max_files`` of the files present (with
    the schema hints applied) and stored as version 0. Changed schema hints are stored as a new
    version; a schema inferred with other :meth:`~AutoLoaderOptions.inference_key` options is refused.
    """
    latest = store.latest()
    if latest is None:
        folder = locate(source_dir)
        files = options.landed_files(folder)
        # Files a run would not read yet (empty, unopenable, unreadable names) are not read
        # to infer the schema either: one of them would fail the inference.
        held = {h.file.path for h in hold_back(files)}
        readable = [f for f in files if f.path not in held]
        if not readable:
            raise NothingToInferError(str(source_dir), store.location)
        sample = [f.path for f in readable[: options.schema_inference_max_files]]
        whole_folder = (not held and len(sample) == len(files) and "recursiveFileLookup" not in options.reader_options
                        and options.path_pattern is None)
        inferred = infer_schema(spark, str(folder) if whole_folder else sample, options, store=folder.store)
        return _add(store, apply_schema_hints(inferred, options.schema_hints), options,
                    f"inferred from {len(sample)} file(s) in {source_dir}", sample)
    expected = options.inference_key()
    if dict(latest.inferred_with) != expected:
        raise StoredSchemaError(
            f"The schema stored at {store.location} (version {latest.version}) was inferred with "
            f"{dict(latest.inferred_with)}, but the ingestion now reads with {expected}. Restore the "
            "options, or start over with a new schema location and a full refresh of the table."
        )
    if (latest.schema_hints or None) != options.schema_hints:
        return _add(store, apply_schema_hints(latest.schema, options.schema_hints), options,
                    f"schema hints changed from {latest.schema_hints!r} to {options.schema_hints!r}")
    return latest


def add_columns(
    store: SchemaStore,
    current: StoredSchema,
    columns: T.StructType,
    *,
    options: AutoLoaderOptions,
    files: Sequence[str],
) -> StoredSchema:
    """Store ``current`` plus ``columns`` (typed by the schema hints where hinted) as the
    next version."""
    # The hints type the columns they name; hinted columns not among them are not added here.
    hinted = apply_schema_hints(columns, options.schema_hints).fields[: len(columns.fields)]
    return _add(store, T.StructType([*current.schema.fields, *hinted]), options,
                f"added columns {[f.name for f in hinted]} found in {len(files)} file(s)", files)


def _add(store: SchemaStore, schema: T.StructType, options: AutoLoaderOptions, reason: str,
         files: Sequence[str] = ()) -> StoredSchema:
    return store.add(schema, inferred_with=options.inference_key(), schema_hints=options.schema_hints, reason=reason,
                     files=files)
