"""The ``versions_whole`` invariant: no table has a half-written version. Delta's history of
every table reads (every commit parses), its versions run without gaps, no streaming batch
is committed twice, and every data file of the latest snapshot exists with the size and row
count its log states. Read through Delta's public interfaces (delta-rs), never its log files."""

from __future__ import annotations

from lakehouse_assets.location import Location
from lakehouse_assets.reliability import table_reader
from lakehouse_assets.reliability.report import InvariantResult
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage.discovery import discover_tables

VERSIONS_WHOLE = "versions_whole"


def check_versions_whole(settings: LakehouseSettings) -> InvariantResult:
    """No table under the root has a half-written version."""
    result = InvariantResult(VERSIONS_WHOLE, "no table has a half-written version")
    tables = discover_tables(settings.root)
    if not tables:
        result.skipped = "no tables yet"
    for name in tables:
        check_table_whole(result, name, table_reader.table_path(settings, name))
    return result


def check_table_whole(result: InvariantResult, name: str, path: Location) -> None:
    """Add to ``result`` whatever makes the table at ``path`` (a folder on a disk or a store)
    not whole."""
    try:
        commits = table_reader.history(path)
    except Exception as exc:  # noqa: BLE001 - delta-rs raises many types for a damaged log
        result.add(name, f"its history cannot be read: {table_reader.error_summary(exc)}")
        return
    numbers = [c.version for c in commits]
    if not numbers:
        result.add(name, "its history holds no commit")
        return
    gaps = sorted(set(range(numbers[0], numbers[-1] + 1)) - set(numbers))
    if gaps:
        result.add(name, f"its history misses versions {gaps[:10]} (versions {numbers[0]}..{numbers[-1]})")
    seen: dict[tuple[str, int], int] = {}
    twice = []
    for commit in commits:
        if commit.query is None or commit.batch_id is None:
            continue
        batch = (commit.query, commit.batch_id)
        if batch in seen:
            twice.append(f"query {batch[0]} batch {batch[1]}: versions {seen[batch]} and {commit.version}")
        seen.setdefault(batch, commit.version)
    if twice:
        result.add(name, f"{len(twice)} streaming batches are committed more than once", twice)
    try:
        files = table_reader.snapshot_files(path)
    except Exception as exc:  # noqa: BLE001 - delta-rs raises many types for a damaged log
        result.add(name, f"the latest snapshot cannot be loaded: {table_reader.error_summary(exc)}")
        return
    missing, wrong = [], []
    for f in files:
        # The path as the log names it, decoded once already: not parsed again (locate() would
        # decode a partition folder's escapes, such as %3A, a second time).
        data = Location(f.path, path.store)
        found = data.file()
        if found is None:
            missing.append(f.relative_path)
            continue
        if f.size is not None and found.size != f.size:
            wrong.append(f"{f.relative_path}: {found.size} bytes, the log says {f.size}")
            continue
        try:
            rows = table_reader.parquet_rows(data)
        except Exception as exc:  # noqa: BLE001 - pyarrow's errors for a torn file vary
            wrong.append(f"{f.relative_path}: not readable Parquet ({table_reader.error_summary(exc)})")
            continue
        if f.num_records is not None and rows != f.num_records:
            wrong.append(f"{f.relative_path}: {rows} rows, the log says {f.num_records}")
    if missing:
        result.add(name, f"{len(missing)} data files of the latest version are missing", missing)
    if wrong:
        result.add(name, f"{len(wrong)} data files differ from their log entry", wrong)
