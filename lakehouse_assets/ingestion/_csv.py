"""Header-aware CSV parsing, run on the executors by ``mapInArrow``.

Spark's CSV reader matches columns by position with one header for all files, so a file whose
header adds, drops or reorders a column would be read into the wrong columns. Here each record
becomes a map from its own file's header names to raw text, and the rescue logic decides what
fits. A file split is read in order, so the first non-empty line of a file's first split is
its header; a later split reads the header from the file itself.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
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
# One record: raw text, name -> value pairs (None when it does not parse), malformed, file, line.
Record = tuple[str, list[tuple[str, str | None]] | None, bool, str, int | None]


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
    one row per CSV record (:data:`OUTPUT_SCHEMA`) out; blank and header lines are none. A line
    that does not parse, or has more or fewer values than its header has names, is malformed:
    its parsed values are kept under their names and its raw text goes to rescued data.
    """
    state = _FileState(dialect, store)
    for batch in batches:
        rows: list[Record] = []
        columns = (batch.column(name).to_pylist() for name in ("value", "_source_file", "_block_start"))
        for value, file, block in zip(*columns, strict=True):
            if value is None:
                continue
            if multi_line:
                rows += [(*parsed, file, n) for n, parsed in enumerate(parse_document(value, dialect), start=1)]
                continue
            state.enter(file, block)
            if state.line is not None:
                state.line += 1
            if not value:
                continue
            if state.needs_header:
                state.names, state.needs_header = list(header_of([value], dialect)), False
                continue
            rows.append((*parse_line(value, state.names, dialect), file, state.line))
        if rows:
            yield records_batch(rows)


class _FileState:
    """The header of the file split being read, and the number of the line read (1-based; None
    in a later split of a file: it does not know where it starts)."""

    def __init__(self, dialect: CsvDialect, store: ObjectStore) -> None:
        self.dialect = dialect
        self.store = store
        self.key: tuple[str, int] | None = None
        self.names: list[str] | None = None
        self.needs_header = False
        self.line: int | None = 0

    def enter(self, file: str, block: int) -> None:
        if self.key == (file, block):
            return
        self.key = (file, block)
        self.line = 0 if block == 0 else None
        self.needs_header = self.dialect.header and block == 0
        later_split = self.dialect.header and block != 0
        self.names = list(cached_header(file, self.dialect, self.store)) if later_split else None


def records_batch(rows: Sequence[Record]) -> pa.RecordBatch:
    """Records (raw text, fields, malformed, file, line) as :data:`OUTPUT_SCHEMA`'s batch."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(OUTPUT_SCHEMA)
    arrays = [pa.array(list(values), field.type) for values, field in zip(columns, OUTPUT_SCHEMA, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=OUTPUT_SCHEMA)


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
    """Every record of a whole file, where quoted values may span lines. A record that does not
    parse is malformed whole, all its lines (the reader starts afresh at the next line)."""
    lines = list(io.StringIO(text.lstrip(BOM), newline=""))
    reader = dialect.reader(lines)
    names: list[str] | None = None if dialect.header else []
    start = 0
    while True:
        try:
            tokens: list[str] | None = next(reader)
        except csv.Error:
            tokens = None
        except StopIteration:
            return
        raw = "".join(lines[start : reader.line_num]).rstrip("\r\n")
        start = reader.line_num
        if not raw:
            continue  # a blank line
        if names is None:
            names = header_names(tokens or [])
        elif tokens is None:
            yield raw, None, True
        else:
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
    """The header of the file at ``path`` (on a store: reached through ``store``), read once per
    path: a streamed file is read once under its name, and every split after the first needs it."""
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
