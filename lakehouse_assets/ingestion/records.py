"""Landed files as records: one row per landed record, before any schema is applied.

JSON and CSV text is parsed into a map from field name to raw value text (``_fields``), next
to the record's raw text (``_record``): keeping the raw text is what lets a value that does not
fit, an unknown field or a malformed record be rescued instead of dropped. Parquet is read by
Spark's Parquet reader directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Literal, overload

from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.readwriter import DataStreamReader

from lakehouse_assets.ingestion._csv import CsvDialect, parse_csv_batches
from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.ingestion.files import data_file_glob, ignored_name_regex
from lakehouse_assets.ingestion.options import AutoLoaderOptions
from lakehouse_assets.location import ObjectStore

RECORD = "_record"
FIELDS = "_fields"
MALFORMED = "_malformed"
FILE = SOURCE_FILE_COLUMN  # a staged record keeps its file under its final name
LINE = SOURCE_LINE_COLUMN  # and its place in the file
BLOCK = "_block_start"
_FILE_NAME = "__lakehouse_file_name"

RAW_FIELDS_TYPE = T.MapType(T.StringType(), T.StringType())
RECORDS_SCHEMA = T.StructType(
    [
        T.StructField(RECORD, T.StringType()),
        T.StructField(FIELDS, RAW_FIELDS_TYPE),
        T.StructField(MALFORMED, T.BooleanType()),
        T.StructField(FILE, T.StringType()),
        T.StructField(LINE, T.LongType()),
    ]
)
# Where Hadoop's line reader ends a line; JSON files are read whole and split here, so each
# line keeps its number.
_LINE_END = r"\r\n|\r|\n"
_POSITION = "__lakehouse_position"

# Spark's file source silently skips files older than maxFileAge (7 days) before the newest
# modification time it has seen: a backfill with ancient times, or one file with a future
# time, would lose files. Auto Loader has no such limit; the largest age Spark accepts is none.
NEVER_TOO_OLD = f"{2**63 - 1}ms"
# A file deleted between the listing and the read would fail its batch and every replay of it:
# it is skipped (its records are gone with it) and the run names it (state.vanished_message).
_IGNORE_MISSING_FILES = "ignoreMissingFiles"


@overload
def file_reader(
    spark: SparkSession, options: AutoLoaderOptions, *, streaming: Literal[True], name_glob: str | None = None
) -> DataStreamReader: ...
@overload
def file_reader(
    spark: SparkSession, options: AutoLoaderOptions, *, streaming: Literal[False], name_glob: str | None = None
) -> DataFrameReader: ...
@overload
def file_reader(
    spark: SparkSession, options: AutoLoaderOptions, *, streaming: bool, name_glob: str | None = None
) -> DataStreamReader | DataFrameReader: ...
def file_reader(
    spark: SparkSession, options: AutoLoaderOptions, *, streaming: bool, name_glob: str | None = None
) -> DataStreamReader | DataFrameReader:
    """Spark's reader for the landing folder: text for JSON/CSV (JSON files whole, so each
    record keeps its line number; CSV files whole when ``multi_line``), Parquet as itself;
    only data files, with the rate limit when streaming. ``name_glob`` narrows the files
    read to the names it matches (files held back)."""
    reader = spark.readStream if streaming else spark.read
    reader = reader.format("parquet" if options.format == "parquet" else "text")
    if options.format == "json" or (options.format != "parquet" and options.multi_line):
        reader = reader.option("wholetext", "true")
    glob = name_glob or options.path_glob_filter or data_file_glob()
    reader = reader.option("pathGlobFilter", glob)
    if "recursiveFileLookup" in options.reader_options:
        reader = reader.option("recursiveFileLookup", options.reader_options["recursiveFileLookup"])
    for key in ("datetimeRebaseMode", "int96RebaseMode"):
        if key in options.reader_options:
            reader = reader.option(key, options.reader_options[key])
    if streaming:
        reader = reader.option("maxFileAge", NEVER_TOO_OLD).option(_IGNORE_MISSING_FILES, "true")
        for key, value in options.rate_limit().items():
            reader = reader.option(key, value)
    return reader


def text_lines(df: DataFrame, options: AutoLoaderOptions) -> DataFrame:
    """The text source's rows with the file each came from."""
    df = df.select(
        F.col("value"),
        F.col("_metadata.file_path").alias(FILE),
        F.col("_metadata.file_block_start").alias(BLOCK),
        F.col("_metadata.file_name").alias(_FILE_NAME),
    )
    return without_ignored_files(df, options).drop(_FILE_NAME)


def with_source_file(df: DataFrame, options: AutoLoaderOptions) -> DataFrame:
    """A file source's rows (Parquet's) with the file each came from as ``_source_file`` and
    the row's position in it as ``_source_line``."""
    df = df.select("*", F.col("_metadata.file_path").alias(FILE), (F.col("_metadata.row_index") + 1).alias(LINE),
                   F.col("_metadata.file_name").alias(_FILE_NAME))
    return without_ignored_files(df, options).drop(_FILE_NAME)


def without_ignored_files(df: DataFrame, options: AutoLoaderOptions) -> DataFrame:
    """Spark lists only data files when the glob is ours (:func:`data_file_glob`). With the
    caller's own glob it may list in-progress names too; their rows are dropped here."""
    if not options.path_glob_filter:
        return df
    return df.where(~F.col(_FILE_NAME).rlike(ignored_name_regex()))


def json_options(options: AutoLoaderOptions) -> dict[str, str]:
    """Options for Spark's JSON parser, always permissive: a record that does not parse is
    rescued, never a reason to stop."""
    return {**dict(options.reader_options), "mode": "PERMISSIVE"}


def json_documents(files: DataFrame, options: AutoLoaderOptions) -> DataFrame:
    """JSON documents (each line of a file read whole, or the whole file with ``multi_line``)
    as records' raw text (``_record``, ``_source_file``, ``_source_line``), not parsed yet. An
    array of objects is one record per element, as Spark's JSON reader reads it; a blank line is
    none. ``_source_line`` is the line's number (shared by an array's elements), or with
    ``multi_line`` the record's position in its file.
    """
    opts = json_options(options)
    if options.multi_line:
        lines = files.select(F.col("value"), F.col(FILE), F.lit(None).cast(T.LongType()).alias(LINE))
    else:
        split = F.posexplode(F.split(F.col("value"), _LINE_END)).alias(_POSITION, "value")
        lines = files.select(split, F.col(FILE)).select(
            F.col("value"), F.col(FILE), (F.col(_POSITION) + 1).cast(T.LongType()).alias(LINE))
    # Hadoop's line reader drops a file's leading UTF-8 BOM; a whole-text read keeps it.
    first = F.col(LINE).isNull() | (F.col(LINE) == 1)
    doc = F.when(first, F.regexp_replace(F.col("value"), "^\ufeff", "")).otherwise(F.col("value"))
    elements = F.from_json(doc, T.ArrayType(T.StringType()), opts)
    objects_array = (
        F.regexp_like(doc, F.lit(r"^\s*\["))
        & elements.isNotNull()
        # from_json parses into a MapType (its docs say so); its annotation leaves MapType out.
        & F.forall(elements, lambda e: F.from_json(e, RAW_FIELDS_TYPE, opts).isNotNull())  # type: ignore[arg-type]
    )
    documents = (
        F.when(F.regexp_like(doc, F.lit(r"^\s*$")), F.array().cast(T.ArrayType(T.StringType())))
        .when(objects_array, elements)
        .otherwise(F.array(doc))
    )
    records = lines.select(F.posexplode(documents).alias(_POSITION, RECORD), F.col(FILE), F.col(LINE))
    return records.select(RECORD, FILE, F.coalesce(F.col(LINE), F.col(_POSITION) + 1).alias(LINE))


def json_fields(record: Column, options: AutoLoaderOptions) -> Column:
    """A JSON record's fields as a map from name to raw value text; null when the record is
    malformed, or repeats a key (ambiguous: which value is the field's?)."""
    parsed = F.from_json(record, RAW_FIELDS_TYPE, json_options(options))  # type: ignore[arg-type]  # a MapType
    keys = F.map_keys(parsed)
    return F.when(F.size(keys) == F.size(F.array_distinct(keys)), parsed)


def parse_json_documents(documents: DataFrame, options: AutoLoaderOptions) -> DataFrame:
    """:func:`json_documents`' rows as records: raw text, fields (:func:`json_fields`),
    malformed or not, and the file."""
    fields = json_fields(F.col(RECORD), options)
    return documents.select(F.col(RECORD), fields.alias(FIELDS), fields.isNull().alias(MALFORMED), F.col(FILE),
                            F.col(LINE))


def csv_dialect(options: AutoLoaderOptions) -> CsvDialect:
    opts = options.reader_options
    return CsvDialect(
        header=options.header,
        sep=opts.get("sep", opts.get("delimiter", ",")),
        quote=opts.get("quote", '"'),
        escape=opts.get("escape"),
        null_value=opts.get("nullValue", ""),
    )


def csv_records(lines: DataFrame, options: AutoLoaderOptions, store: ObjectStore) -> DataFrame:
    """CSV lines (or whole files with ``multi_line``) as records, each file read by its own
    header (see :mod:`lakehouse_assets.ingestion._csv`; on a store, reached through ``store``)."""
    function = partial(parse_csv_batches, dialect=csv_dialect(options), multi_line=options.multi_line, store=store)
    return lines.mapInArrow(function, RECORDS_SCHEMA)


def read_batch_records(spark: SparkSession, paths: Sequence[str] | str, options: AutoLoaderOptions,
                       store: ObjectStore) -> DataFrame:
    """The records of some CSV files (or of a folder's data files), read once."""
    load = paths if isinstance(paths, str) else list(paths)
    return csv_records(text_lines(file_reader(spark, options, streaming=False).load(load), options), options, store)
