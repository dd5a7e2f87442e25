"""From raw records to bronze rows: typed columns, ``_rescued_data``, and the file metadata.

Nothing that landed is dropped. For every record:

- a value that parses as its column's type fills the column;
- a value that does not is null in its column, and its raw text goes to ``_rescued_data``
  under the column's name;
- a field the schema has no column for goes to ``_rescued_data`` in ``rescue`` mode, is
  ignored in ``none`` mode, and stops the query (naming it) in ``addNewColumns`` and
  ``failOnNewColumns`` mode; a field that differs from a column only by letter case is always
  rescued (Delta column names are case-insensitive);
- a record that does not parse at all has null columns and its raw text in
  ``_rescued_data`` as ``_raw``.

``_rescued_data`` is a JSON object string, null when nothing was rescued, and names the file
as ``_file``: ``{"heartrate": "n/a", "_file": "file:/landing/recordings/0001.json"}``.
Everything is Spark expressions evaluated on the executors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse_assets.ingestion.columns import (
    INGESTED_AT_COLUMN,
    METADATA_COLUMNS,
    RESCUED_DATA_COLUMN,
    SOURCE_FILE_COLUMN,
    SOURCE_LINE_COLUMN,
)
from lakehouse_assets.ingestion.options import AutoLoaderOptions, SchemaEvolutionMode
from lakehouse_assets.ingestion.records import (
    FIELDS,
    FILE,
    LINE,
    MALFORMED,
    RECORD,
    json_fields,
    json_options,
    parse_json_documents,
)
from lakehouse_assets.location import ObjectStore, locate

# Markers in the errors a query raises from its executors; the driver finds them in the
# StreamingQueryException's text to learn which columns appeared, and where.
NEW_COLUMNS_MARKER = "[LAKEHOUSE_NEW_COLUMNS]"
READ_SCHEMA_STALE_MARKER = "[LAKEHOUSE_READ_SCHEMA_STALE]"

_STRING_ARRAY = T.ArrayType(T.StringType())


def shape_records(
    records: DataFrame,
    schema: T.StructType,
    *,
    mode: SchemaEvolutionMode,
    schema_location: str,
    typed_parse: bool = False,
) -> DataFrame:
    """Bronze rows from raw JSON/CSV records (``_record``, ``_fields``, ``_malformed``,
    ``_source_file``), with ``schema``'s columns, then ``_rescued_data``, ``_source_file``
    and ``_ingested_at``. ``schema_location`` is named in the error new columns raise.

    With ``typed_parse`` (see :func:`shape_json_records`), a record marked as fitting takes its
    columns from the typed parse, and only the others are read from ``_fields``."""
    fields = F.col(FIELDS)
    columns: list[Column] = []
    mismatches: list[Column] = []
    for field in schema.fields:
        raw = F.try_element_at(fields, F.lit(field.name))
        value = parse_value(raw, field.dataType)
        typed = F.when(F.col(_FITS), F.col(_TYPED).getField(field.name)).otherwise(value) if typed_parse else value
        columns.append(typed.alias(field.name))
        mismatches.append(F.when(raw.isNotNull() & value.isNull(), raw).alias(field.name))

    names = [f.name for f in schema.fields]
    exact = _string_array(names)
    lowered = _string_array(sorted({n.lower() for n in names}))
    reserved = _string_array(METADATA_COLUMNS)

    def unknown(key: Column) -> Column:
        return ~F.array_contains(lowered, F.lower(key))

    def rescued_key(key: Column) -> Column:
        # Case variants of a column always; fields named like a metadata column unless new
        # columns are ignored; any unknown field in rescue mode.
        condition = ~F.array_contains(exact, key) & ~unknown(key)
        if mode != "none":
            condition = condition | F.array_contains(reserved, key)
        if mode == "rescue":
            condition = condition | unknown(key)
        return condition

    extra = F.map_filter(fields, lambda k, v: rescued_key(k))
    rescued = json_object(
        [
            F.to_json(F.struct(*mismatches)) if mismatches else None,
            F.to_json(extra),
            F.when(F.col(MALFORMED), F.to_json(F.struct(F.col(RECORD).alias("_raw")))),
        ],
        file=F.col(FILE),
    )
    if mode in ("addNewColumns", "failOnNewColumns"):
        new_keys = F.filter(F.map_keys(fields), lambda k: unknown(k) & ~F.array_contains(reserved, k))
        guard = F.when(F.size(new_keys) > 0, _raise(NEW_COLUMNS_MARKER, new_keys, F.col(FILE), schema_location))
        rescued = F.coalesce(guard.cast(T.StringType()), rescued)
    if typed_parse:
        rescued = F.when(~F.col(_FITS), rescued)
    return records.select(
        *columns,
        rescued.alias(RESCUED_DATA_COLUMN),
        F.col(FILE).alias(SOURCE_FILE_COLUMN),
        F.col(LINE).alias(SOURCE_LINE_COLUMN),
        F.current_timestamp().alias(INGESTED_AT_COLUMN),
    )


# Column types whose values Spark's typed JSON parser reads exactly as a cast of their raw text
# reads them (or refuses, marking the record corrupt). Other types (timestamps, decimals,
# nested) parse differently in the two, so records with them always take the rescue path.
_TYPED_PARSE_TYPES = (
    T.StringType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
)
_CORRUPT = "__lakehouse_corrupt_record"
# The columns shape_json_records adds to records: the record parsed as the schema's types, and
# whether it fits the schema (nothing to rescue).
_TYPED = "__lakehouse_typed"
_FITS = "__lakehouse_fits"


def shape_json_records(
    documents: DataFrame,
    schema: T.StructType,
    *,
    mode: SchemaEvolutionMode,
    schema_location: str,
    options: AutoLoaderOptions,
) -> DataFrame:
    """Bronze rows from JSON records' raw text (:func:`~.records.json_documents`), exactly as
    :func:`shape_records` shapes :func:`~.records.parse_json_documents`' output, in about half
    the time: a record that fits its schema (nearly every one) is read by Spark's typed JSON
    parser alone; only the others are parsed again as name -> raw text and rescued.
    """
    if not all(isinstance(f.dataType, _TYPED_PARSE_TYPES) for f in schema.fields):
        records = parse_json_documents(documents, options)
        return shape_records(records, schema, mode=mode, schema_location=schema_location)
    record = F.col(RECORD)
    with_corrupt = T.StructType([*schema.fields, T.StructField(_CORRUPT, T.StringType())])
    typed = F.from_json(record, with_corrupt, {**json_options(options), "columnNameOfCorruptRecord": _CORRUPT})
    keys = F.json_object_keys(record)  # null for a document that is not an object
    fits = (
        typed.isNotNull()
        & typed.getField(_CORRUPT).isNull()
        & keys.isNotNull()
        & (F.size(F.array_except(keys, _string_array(schema.names))) == 0)
        & (F.size(keys) == F.size(F.array_distinct(keys)))
    )
    for field in schema.fields:
        if isinstance(field.dataType, (T.DoubleType, T.FloatType)):
            # A number too large for its type: the typed parser reads infinity, the raw-text
            # parser the text "Infinity"; the rescue path decides, as it always has.
            value = typed.getField(field.name)
            fits = fits & (value.isNull() | (F.abs(value) != F.lit(float("inf"))))
    staged = documents.select(record, F.col(FILE), F.col(LINE), typed.alias(_TYPED),
                              F.coalesce(fits, F.lit(False)).alias(_FITS))
    # Guarded by the record not fitting, so a fitting record is parsed once, whatever the
    # optimizer does with the expression.
    fields = F.when(~F.col(_FITS), json_fields(record, options))
    staged = staged.select("*", fields.alias(FIELDS), (~F.col(_FITS) & fields.isNull()).alias(MALFORMED))
    return shape_records(staged, schema, mode=mode, schema_location=schema_location, typed_parse=True)


def shape_parquet(
    rows: DataFrame,
    schema: T.StructType,
    *,
    mode: SchemaEvolutionMode,
    extra: T.StructType,
    schema_location: str,
    store: ObjectStore,
) -> DataFrame:
    """Bronze rows from Parquet rows read with ``schema`` plus ``extra`` (the columns of the
    files being read that the schema lacks, read only to be rescued), with ``_source_file`` (a
    file on object storage is reached through ``store``). A file with a column that neither has
    stops the query: to evolve the schema (``addNewColumns``), to refuse it
    (``failOnNewColumns``), or to plan the read again with the column (``rescue``). Parquet
    values are typed by the file: a type Spark cannot read as the stored one fails with Spark's error."""
    file = F.col(FILE)
    rescued = json_object(
        [F.to_json(F.struct(*[F.col(f"`{f.name}`") for f in extra.fields])) if extra.fields else None], file=file
    )
    if mode != "none":
        read = [*schema.fields, *extra.fields]
        known = sorted({f.name.lower() for f in read} | {c.lower() for c in METADATA_COLUMNS})
        unread = _unread_parquet_columns(known, store)(file)
        marker = READ_SCHEMA_STALE_MARKER if mode == "rescue" else NEW_COLUMNS_MARKER
        guard = F.when(F.size(unread) > 0, _raise(marker, unread, file, schema_location))
        rescued = F.coalesce(guard.cast(T.StringType()), rescued)
    return rows.select(
        *[F.col(f"`{f.name}`") for f in schema.fields],
        rescued.alias(RESCUED_DATA_COLUMN),
        file.alias(SOURCE_FILE_COLUMN),
        F.col(LINE).alias(SOURCE_LINE_COLUMN),
        F.current_timestamp().alias(INGESTED_AT_COLUMN),
    )


def parse_value(raw: Column, data_type: T.DataType) -> Column:
    """The raw text of a value as ``data_type``, or null when it does not parse as one."""
    if isinstance(data_type, T.StringType):
        return raw
    if isinstance(data_type, (T.StructType, T.ArrayType, T.MapType)):
        # from_json parses into a MapType too (its docs say so); its annotation leaves MapType out.
        return F.from_json(raw, data_type, {"mode": "PERMISSIVE"})  # type: ignore[arg-type]
    return raw.try_cast(data_type)


def json_object(fragments: Sequence[Column | None], *, file: Column) -> Column:
    """One JSON object string from JSON object strings (null or ``{}`` ones contribute
    nothing), with ``_file`` added; null when there is nothing to say.

    The objects are joined as text rather than as maps: a map cannot hold the same key twice,
    and a landed field may well be called ``_raw`` or ``_file``.
    """
    inners = [_inner(f) for f in fragments if f is not None]
    if not inners:
        return F.lit(None).cast(T.StringType())
    parts = F.array_compact(F.array(*inners))
    file_part = _inner(F.to_json(F.struct(file.alias("_file"))))
    return F.when(
        F.size(parts) > 0,
        F.concat(F.lit("{"), F.array_join(F.concat(parts, F.array(file_part)), ","), F.lit("}")),
    )


def _inner(obj: Column) -> Column:
    """The members of a JSON object string (``{"a":1}`` -> ``"a":1``); null when empty."""
    return F.when(F.length(obj) > 2, F.substr(obj, F.lit(2), F.length(obj) - 2))


def _string_array(values: Sequence[str]) -> Column:
    return F.array(*[F.lit(v) for v in values]).cast(_STRING_ARRAY)


def _raise(marker: str, columns: Column, file: Column, schema_location: str) -> Column:
    payload = F.to_json(
        F.struct(columns.alias("columns"), file.alias("file"), F.lit(schema_location).alias("schemaLocation"))
    )
    return F.raise_error(F.concat(F.lit(marker), payload))


@dataclass(frozen=True)
class MarkedError:
    """What an error raised by the query's executors says: the columns, the file they are in,
    and the schema location of the stream."""

    marker: str
    columns: tuple[str, ...]
    file: str | None
    schema_location: str | None


def parse_marker(text: str) -> MarkedError | None:
    """The marked error in an error's text (the first one whose payload parses), or None.
    The query's plan, which a streaming failure prints before its cause, spells the
    marker too, inside the expression that builds it: those are passed over."""
    found = sorted((match.start(), marker) for marker in (NEW_COLUMNS_MARKER, READ_SCHEMA_STALE_MARKER)
                   for match in re.finditer(re.escape(marker), text))
    for start, marker in found:
        try:
            payload, _ = json.JSONDecoder().raw_decode(text, start + len(marker))
        except ValueError:
            continue
        if isinstance(payload, dict):
            return MarkedError(
                marker=marker,
                columns=tuple(payload.get("columns") or ()),
                file=payload.get("file"),
                schema_location=payload.get("schemaLocation"),
            )
    return None


def _unread_parquet_columns(known_lowercase: Sequence[str], store: ObjectStore) -> Callable[[Column], Column]:
    known = frozenset(known_lowercase)

    def unread(paths: pd.Series) -> pd.Series:
        by_path = {p: [c for c in parquet_columns(p, store) if c.lower() not in known] for p in paths.unique()}
        return paths.map(by_path)

    # What ``@F.pandas_udf(_STRING_ARRAY)`` on ``unread`` makes. pyspark's stubs neither export
    # pandas_udf from functions nor have its form whose kind comes from the type hints.
    udf: Callable[[Column], Column] = F.pandas_udf(_STRING_ARRAY)(unread)  # type: ignore[attr-defined]
    return udf


@lru_cache(maxsize=4096)
def parquet_columns(path: str, store: ObjectStore) -> tuple[str, ...]:
    """The top-level column names in a Parquet file's footer, the file on a store reached through
    ``store`` (cached per executor process)."""
    import pyarrow.parquet as pq

    file = locate(path, store)
    return tuple(pq.read_schema(file.path, filesystem=file.fs).names)
