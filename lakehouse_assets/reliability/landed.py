"""How many records a landed JSON file holds, counted without Spark.

Counted as the ingestion promises to read them: one record per non-blank line (lines end
at ``\\n``, ``\\r`` or ``\\r\\n``, as Hadoop's line reader splits them), a line holding a JSON
array of objects being one record per element, a malformed line one record (it is rescued,
not dropped). A leading UTF-8 byte order mark is not part of the first line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from lakehouse_assets.ingestion.files import landed_paths, local_file_path

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


def json_record_count(path: Path) -> int:
    """The records ingestion must turn ``path`` (JSON lines) into."""
    data = path.read_bytes()
    if data.startswith(_BOM):
        data = data[len(_BOM):]
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


def landed_record_counts(source_dir: Path) -> dict[str, int]:
    """Per landed data file of ``source_dir`` (by :func:`landing_key`), its record count.

    Files that vanish while being counted, or cannot be read, are left out: ingestion cannot
    read them either, and it reports them itself."""
    counts = {}
    for path in landed_paths(source_dir):
        try:
            counts[landing_key(str(path), source_dir)] = json_record_count(path)
        except OSError:
            continue
    return counts


def landing_key(source_file: str, source_dir: Path) -> str:
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
