"""Header-aware CSV parsing, run on the executors by ``mapInArrow``.

Spark's CSV reader matches columns by position and takes one header for all files, so a
file whose header adds, drops or reorders a column would be read into the wrong columns.
Here every file's own header names its values: each record becomes a map from column name
to raw text, and the shared rescue logic decides what fits the stored schema.

Rows arrive in file order within a partition (Spark reads a file split sequentially), so the
first non-empty line of a file's first split is its header. A later split of a large file
reads its header from the file itself.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_assets.location import ObjectStore, locate

if TYPE_CHECKING:
    import _csv

BOM = "\ufeff"
OUTPUT_SCHEMA = pa.schema(
    [
        ("_record", pa.string()),
        ("_fields", pa.map_(pa.string(), pa.string())),
        ("_malformed", pa.bool_()),
        ("_source_file", pa.string()),
        ("_source_line", pa.int64()),
    ]
)


@dataclass(frozen=True)
class CsvDialect:
    """The CSV options the parser honours, with Spark's defaults."""

    header: bool = False
    sep: str = ","
    quote: str = '"'
    escape: str | None = None
    null_value: str = ""

    def reader(self, lines: Iterable[str]) -> _csv.Reader:
        return csv.reader(
            lines, delimiter=self.sep, quotechar=self.quote, escapechar=self.escape, doublequote=True, strict=True
        )


def parse_csv_batches(
    batches: Iterator[pa.RecordBatch], dialect: CsvDialect, multi_line: bool, store: ObjectStore
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: text rows (``value``, ``_source_file``, ``_block_start``) in,
    one row per CSV record out (``_record``, ``_fields``, ``_malformed``, ``_source_file``).

    Blank lines and header lines are not records. A line that does not parse, or has more or
    fewer values than its header has names, is malformed: its parsed values are kept under
    their names and its raw text goes to rescued data. ``store`` reaches files on object storage.
    """
    state = _FileState(dialect, store)
    for batch in batches:
        values = batch.column("value").to_pylist()
        files = batch.column("_source_file").to_pylist()
        blocks = batch.column("_block_start").to_pylist()
        out = _Output()
        for value, file, block in zip(values, files, blocks, strict=True):
            if value is None:
                continue
            if multi_line:
                for position, (record, fields, malformed) in enumerate(parse_document(value, dialect), start=1):
                    out.add(record, fields, malformed, file, position)
                continue
            state.enter(file, block)
            line = state.next_line()
            if not value:
                continue
            if state.needs_header:
                state.set_header(value)
                continue
            record, fields, malformed = parse_line(value, state.names, dialect)
            out.add(record, fields, malformed, file, line)
        if out.records:
            yield out.batch()


class _FileState:
    """The header of the file split being read."""

    def __init__(self, dialect: CsvDialect, store: ObjectStore) -> None:
        self.dialect = dialect
        self.store = store
        self.key: tuple[str, int] | None = None
        self.names: list[str] | None = None
        self.needs_header = False
        self.lines_read: int | None = 0

    def enter(self, file: str, block: int) -> None:
        if self.key == (file, block):
            return
        self.key = (file, block)
        # Lines are numbered from a file's start; a later split does not know where it starts.
        self.lines_read = 0 if block == 0 else None
        self.names = None
        self.needs_header = self.dialect.header and block == 0
        if self.dialect.header and block != 0:
            self.names = list(cached_header(file, self.dialect, self.store))

    def next_line(self) -> int | None:
        """The number of the line being read (1-based), or None in a later split of a file."""
        if self.lines_read is None:
            return None
        self.lines_read += 1
        return self.lines_read

    def set_header(self, line: str) -> None:
        self.names = header_names(_tokens(line.lstrip(BOM), self.dialect) or [])
        self.needs_header = False


class _Output:
    def __init__(self) -> None:
        self.records: list[str] = []
        self.fields: list[list[tuple[str, str | None]] | None] = []
        self.malformed: list[bool] = []
        self.files: list[str] = []
        self.lines: list[int | None] = []

    def add(self, record: str, fields: list[tuple[str, str | None]] | None, malformed: bool, file: str,
            line: int | None) -> None:
        self.records.append(record)
        self.fields.append(fields)
        self.malformed.append(malformed)
        self.files.append(file)
        self.lines.append(line)

    def batch(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [
                pa.array(self.records, pa.string()),
                pa.array(self.fields, pa.map_(pa.string(), pa.string())),
                pa.array(self.malformed, pa.bool_()),
                pa.array(self.files, pa.string()),
                pa.array(self.lines, pa.int64()),
            ],
            schema=OUTPUT_SCHEMA,
        )


def parse_line(
    line: str, names: list[str] | None, dialect: CsvDialect
) -> tuple[str, list[tuple[str, str | None]] | None, bool]:
    """One line as (raw text, name -> value pairs or None, malformed)."""
    tokens = _tokens(line, dialect)
    if tokens is None:
        return line, None, True
    return (line, *_name_values(tokens, names, dialect))


def parse_document(
    text: str, dialect: CsvDialect
) -> Iterator[tuple[str, list[tuple[str, str | None]] | None, bool]]:
    """Every record of a whole file, where quoted values may span lines."""
    lines = list(io.StringIO(text.lstrip(BOM), newline=""))
    names: list[str] | None = None if dialect.header else []
    position = 0
    while position < len(lines):
        if not lines[position].strip("\r\n"):
            position += 1
            continue
        chunk = iter(lines[position:])
        reader = dialect.reader(chunk)
        try:
            tokens: list[str] | None = next(reader)
            consumed = reader.line_num
        except csv.Error:
            tokens, consumed = None, 1
        except StopIteration:
            break
        raw = "".join(lines[position : position + consumed]).rstrip("\r\n")
        position += consumed
        if names is None:
            names = header_names(tokens or [])
            continue
        if tokens is None:
            yield raw, None, True
            continue
        yield (raw, *_name_values(tokens, names or None, dialect))


def _name_values(
    tokens: list[str], names: list[str] | None, dialect: CsvDialect
) -> tuple[list[tuple[str, str | None]], bool]:
    def value(token: str) -> str | None:
        return None if token == dialect.null_value else token

    if not names:  # no header: columns are named by position, as Spark names them
        return [(f"_c{i}", value(t)) for i, t in enumerate(tokens)], False
    pairs = [(name, value(token)) for name, token in zip(names, tokens, strict=False)]
    return pairs, len(tokens) != len(names)


def _tokens(line: str, dialect: CsvDialect) -> list[str] | None:
    try:
        return next(dialect.reader([line]), [])
    except csv.Error:
        return None


def header_names(tokens: list[str]) -> list[str]:
    """Column names from a header line, made unique as Spark makes them: an empty name becomes
    ``_c<i>``, and repeated names get their position appended (``a0``, ``a3``)."""
    names = [t.strip() or f"_c{i}" for i, t in enumerate(tokens)]
    lowered = [n.lower() for n in names]
    return [f"{n}{i}" if lowered.count(n.lower()) > 1 else n for i, n in enumerate(names)]


@lru_cache(maxsize=1024)
def cached_header(path: str, dialect: CsvDialect, store: ObjectStore) -> tuple[str, ...]:
    """:func:`read_header`, once per path: a streamed file is read once under its name, and
    every split after the first needs its header."""
    return read_header(path, dialect, store)


def read_header(path: str, dialect: CsvDialect, store: ObjectStore) -> tuple[str, ...]:
    """The header of the file at ``path`` (on a store: reached through ``store``), read from
    the file as it is now."""
    file = locate(path, store)
    with file.fs.open_input_stream(file.path) as stream:
        return header_of(io.TextIOWrapper(stream, encoding="utf-8", newline=""), dialect)


def header_of(lines: Iterable[str], dialect: CsvDialect) -> tuple[str, ...]:
    """The header of a CSV file's lines: its first non-empty line's names (see
    :func:`header_names`); empty when there is no such line."""
    for line in lines:
        line = line.lstrip(BOM).rstrip("\r\n")
        if line:
            return tuple(header_names(_tokens(line, dialect) or []))
    return ()
