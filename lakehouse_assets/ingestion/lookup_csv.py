"""A small lookup table (the patients' mrn -> name) read from the CSV files landed in a folder.

A lookup is replaced whole on every load, so a wrong read would replace good reference data:
every file is read by its own header (:mod:`._csv`), columns are matched by name ignoring case,
and a file lacking a column or unreadable (:mod:`.readiness`), an empty folder, or a row whose
values do not fit (a row loaded with a null would make its patient "unknown" downstream) stops
the load with an error naming the file and rows; the table keeps its last good version. Columns
the schema lacks are ignored and named. A lookup is small, so it is parsed on the driver and
typed by Spark's casts on a local relation: milliseconds, no Spark job.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse_assets.ingestion._csv import CsvDialect, header_of, parse_document, records_batch
from lakehouse_assets.ingestion.errors import LookupCsvError
from lakehouse_assets.ingestion.files import list_data_files
from lakehouse_assets.ingestion.readiness import hold_back
from lakehouse_assets.ingestion.records import FIELDS, FILE, MALFORMED, RECORD
from lakehouse_assets.ingestion.rescue import parse_value
from lakehouse_assets.location import Location

# Bad rows named in an error; the error gives the total as well.
_SAMPLE_ROWS = 5
_PROBLEM = "_lookup_problem"


@dataclass(frozen=True)
class LookupCsv:
    """A lookup read from CSV: its rows (the schema's columns, checked), the files read, and
    the columns of each file that the schema does not have and that were ignored."""

    rows: DataFrame
    files: tuple[str, ...]
    ignored_columns: Mapping[str, tuple[str, ...]]

    def warnings(self) -> list[str]:
        """One message per file with ignored columns, naming them."""
        return [
            f"Ignored the column{'s' if len(columns) > 1 else ''} {', '.join(repr(c) for c in columns)} of "
            f"{file}: the lookup has no such column. If it should, add it to the lookup's schema; "
            "otherwise nothing to do."
            for file, columns in self.ignored_columns.items()
        ]


def read_lookup_csv(spark: SparkSession, folder: str | os.PathLike[str], schema: str | T.StructType) -> LookupCsv:
    """Read every CSV file in ``folder`` (each starts with a header) as ``schema``'s columns,
    matched by header name, ignoring case; or raise :class:`LookupCsvError` naming every file
    that lacks a column or cannot be read, or the rows whose values do not fit. Each file is
    read once: the rows returned are the ones checked, even if a file is landed again meanwhile.
    """
    source = str(folder)
    # A column list ("name TYPE, ...") parses as a struct; fromDDL is typed as any DataType.
    struct = schema if isinstance(schema, T.StructType) else cast(T.StructType, T.StructType.fromDDL(schema))
    files = list_data_files(folder)
    if not files:
        raise LookupCsvError(
            f"No CSV files in {source}: there is nothing to load the lookup from. Land its CSV "
            f"there (a header line naming {', '.join(struct.names)}, then one row per line)."
        )
    held = hold_back(files)
    problems = [h.message() for h in held]
    unreadable = {h.file.path for h in held}
    ignored: dict[str, tuple[str, ...]] = {}
    wanted = {name.lower() for name in struct.names}
    dialect = CsvDialect(header=True)
    texts: dict[str, str] = {}
    for landed in files:
        if landed.path in unreadable:
            continue
        # Read now, not cached: a lookup file landed again under its name has a new header.
        texts[landed.path] = text = _read_text(landed.location)
        header = header_of(io.StringIO(text, newline=""), dialect)
        present = {name.lower() for name in header}
        missing = [name for name in struct.names if name.lower() not in present]
        if missing:
            problems.append(
                f"{landed.path} has no column {', '.join(repr(m) for m in missing)} (its header has "
                f"{', '.join(repr(h) for h in header) or 'no columns'})"
            )
        extra = tuple(name for name in header if name.lower() not in wanted)
        if extra:
            ignored[landed.path] = extra
    if problems:
        raise LookupCsvError(
            f"Cannot load the lookup from {source}; it keeps its last good version. "
            + "; ".join(problems)
            + f". Fix the file (header {','.join(struct.names)}, matched by name in any order) and land it "
            "again, or remove it."
        )

    # Each record's _source_line is its position in its file; quoted values may span lines.
    rows = [(*parsed, path, n) for path, text in texts.items()
            for n, parsed in enumerate(parse_document(text, dialect), start=1)]
    records = spark.createDataFrame(pa.Table.from_batches([records_batch(rows)]))
    # Header names were made unique ignoring case, so lowering the keys merges nothing.
    fields = F.transform_keys(F.col(FIELDS), lambda key, value: F.lower(key))
    typed = records.select(
        *[
            parse_value(F.try_element_at(fields, F.lit(f.name.lower())), f.dataType).alias(f.name)
            for f in struct.fields
        ],
        _problem(fields, struct).alias(_PROBLEM),
        F.col(FILE),
        F.col(RECORD),
    ).toArrow()
    bad = typed.filter(pc.is_valid(typed.column(_PROBLEM))).select([FILE, RECORD, _PROBLEM]).to_pylist()
    if bad:
        named = "; ".join(f"{row[FILE]} row {row[RECORD]!r}: {row[_PROBLEM]}" for row in bad[:_SAMPLE_ROWS])
        more = f" (and {len(bad) - _SAMPLE_ROWS} more)" if len(bad) > _SAMPLE_ROWS else ""
        raise LookupCsvError(
            f"Cannot load the lookup from {source}; it keeps its last good version. {len(bad)} row"
            f"{'s' if len(bad) != 1 else ''} do not fit: {named}{more}. Correct the rows and land the "
            "file again; a row loaded without its value would silently be missing from the lookup."
        )
    return LookupCsv(
        rows=spark.createDataFrame(typed.select(struct.names), schema=struct),
        files=tuple(f.path for f in files),
        ignored_columns=ignored,
    )


def _read_text(file: Location) -> str:
    """A landed file's text; bytes that are not UTF-8 become U+FFFD, as Spark's text reader
    reads them (the value holding one then fails its column's type, by row)."""
    with file.fs.open_input_stream(file.path) as stream:
        return str(stream.read().decode("utf-8", errors="replace"))


def _problem(fields: Column, schema: T.StructType) -> Column:
    """What is wrong with a record (null when nothing): a number of values that differs from
    its header's, or values their columns' types cannot hold."""
    problems = [F.when(F.col(MALFORMED), F.lit("its number of values differs from its header's"))]
    for field in schema.fields:
        raw = F.try_element_at(fields, F.lit(field.name.lower()))
        type_name = field.dataType.simpleString().upper()
        problems.append(
            F.when(
                raw.isNotNull() & parse_value(raw, field.dataType).isNull(),
                F.concat(F.lit(f"{field.name} '"), raw, F.lit(f"' is not a {type_name}")),
            )
        )
    text = F.concat_ws("; ", *problems)  # skips the nulls
    return F.when(F.length(text) > 0, text)
