"""How many records a landed file holds, counted without Spark.

Counted as the ingestion promises to read them. JSON lines: one record per non-blank line
(lines end at ``\\n``, ``\\r`` or ``\\r\\n``, as Hadoop's line reader splits them), a line
holding a JSON array of objects being one record per element, a malformed line one record
(it is rescued, not dropped). CSV: one record per non-blank line, the header line aside. With
``multi_line``, the file is one document: a JSON array's elements (else one record), or the
CSV records Python's own CSV reader finds. Parquet: the row count its footer states. A
leading UTF-8 byte order mark is not part of the first line. Files are read where they
landed, on a local disk or an object store.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable

from lakehouse_assets.ingestion.files import landed_paths, local_file_path
from lakehouse_assets.location import Location
from lakehouse_assets.reliability.table_reader import parquet_rows

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


def _read_bytes(file: Location) -> bytes:
    with file.fs.open_input_stream(file.path) as stream:
        return bytes(stream.read())


def json_record_count(file: Location) -> int:
    """The records ingestion must turn ``file`` (JSON lines) into."""
    data = _read_bytes(file).removeprefix(_BOM)
    count = 0
    for line in _LINE_END.split(data):
        text = line.strip()
        if not text:
            continue
        if text.startswith(b"["):
            try:
                document = json.loads(text)
            except ValueError:
                document = None
            if isinstance(document, list) and all(isinstance(e, dict) for e in document):
                count += len(document)
                continue
        count += 1
    return count


def csv_record_count(file: Location, *, header: bool) -> int:
    """The records ingestion must turn ``file`` (CSV, one record per line) into."""
    data = _read_bytes(file).removeprefix(_BOM)
    lines = sum(1 for line in _LINE_END.split(data) if line.strip())
    return max(0, lines - 1) if header else lines


def _document_record_count(file: Location, file_format: str, header: bool) -> int:
    text = _read_bytes(file).removeprefix(_BOM).decode("utf-8", errors="replace")
    if file_format == "json":
        try:
            document = json.loads(text)
        except ValueError:
            return 1
        return len(document) if isinstance(document, list) else 1
    rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    return max(0, len(rows) - 1) if header else len(rows)


def record_counter(file_format: str, *, header: bool = False,
                   multi_line: bool = False) -> Callable[[Location], int] | None:
    """How to count the records of a file of ``file_format`` as ingestion reads them; None
    for a format this module cannot count."""
    if multi_line and file_format in ("json", "csv"):
        return lambda file: _document_record_count(file, file_format, header)
    if file_format == "json":
        return json_record_count
    if file_format == "csv":
        return lambda file: csv_record_count(file, header=header)
    if file_format == "parquet":
        return parquet_rows
    return None


def landed_record_counts(source_dir: Location, count: Callable[[Location], int] = json_record_count,
                         pattern: str | None = None) -> dict[str, int]:
    """Per landed data file of ``source_dir`` (a folder on a disk or a store; by
    :func:`landing_key`; only those ``pattern`` names, if given), its record count.

    Files that vanish while being counted, or cannot be read, are left out: ingestion cannot
    read them either, and it reports them itself."""
    counts = {}
    for path in landed_paths(source_dir, pattern):
        try:
            # A plain path or an s3a:// URI, not URL-encoded: parsing it as a URI would garble
            # a name holding "%" or "#".
            counts[landing_key(path, source_dir)] = count(Location(path, source_dir.store))
        except OSError:
            continue
    return counts


def landing_key(source_file: str, source_dir: Location) -> str:
    """A landed file's path relative to its source folder, from a path or a ``_source_file``
    URI. A lakehouse copied or moved elsewhere keeps its tables' old absolute paths, so a
    path under another ``.../landing/<source>/`` folder is taken relative to that one."""
    path = local_file_path(source_file)
    prefix = str(source_dir).rstrip("/") + "/"
    if path.startswith(prefix):
        return path[len(prefix):]
    marker = f"/{source_dir.parent.name}/{source_dir.name}/"
    head, found, tail = path.rpartition(marker)
    return tail if found else path
