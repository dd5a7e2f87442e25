"""A Delta table read for the invariants, through Delta's public interfaces only (delta-rs, and
pyarrow over the files it names), on a local disk or an object store: no Spark and none of the
write path, so a bug in the code that writes the tables cannot also hide itself from the check.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_assets.location import Location
from lakehouse_assets.reliability.report import InvariantResult
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaRsSnapshot, HistoryEntry, SnapshotFile
from lakehouse_assets.storage.delta import table_history
from lakehouse_assets.storage.delta_rs_snapshot import open_delta_table


def history(table: Location) -> list[HistoryEntry]:
    """Every commit of the table, oldest first, as Delta's history gives them."""
    return table_history(table)[::-1]


def snapshot_files(table: Location, version: int | None = None) -> list[SnapshotFile]:
    """The data files of the latest snapshot (or of ``version``) with the size and row count
    the log states."""
    return _snapshot(table, version).files()


def added_files(table: Location, version: int) -> list[SnapshotFile]:
    """The data files ``version`` added to the table: those it lists and the version before did not."""
    before = {f.relative_path for f in snapshot_files(table, version - 1)} if version > 0 else set()
    return [f for f in snapshot_files(table, version) if f.relative_path not in before]


def parquet_rows(file: Location) -> int:
    """The row count in a Parquet file's footer."""
    return int(pq.read_metadata(file.path, filesystem=file.fs).num_rows)


def file_rows(table: Location, file: SnapshotFile) -> pa.Table:
    """The rows of one data file of the table."""
    data = Location(file.path, table.store)
    return pq.read_table(data.path, filesystem=data.fs)


def read_rows(table: Location, columns: Sequence[str] | None = None) -> pa.Table:
    """The latest snapshot's rows (all columns, or ``columns`` that exist)."""
    snapshot = _snapshot(table)
    if columns is not None:
        present = set(snapshot.column_names())
        columns = [c for c in columns if c in present]
    return snapshot.to_arrow(columns)


def table_path(settings: LakehouseSettings, name: str) -> Location:
    """The folder of table ``layer.name``, on a local disk or an object store."""
    layer, table = name.split(".", 1)
    return settings.table_path(layer, table)


def read_or_report(result: InvariantResult, settings: LakehouseSettings, name: str,
                   columns: list[str] | None) -> pa.Table | None:
    """The rows of table ``name`` (``layer.name``), or None after recording in ``result`` why
    they cannot be read."""
    path = table_path(settings, name)
    try:
        return read_rows(path, columns)
    except Exception as exc:  # noqa: BLE001 - a damaged table is a finding, not a crash
        result.add(name, f"cannot read the table at {path}: {error_summary(exc)}")
        return None


def row_tuples(table: pa.Table, columns: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """Each row's values of ``columns`` (None for a column the table lacks), hashable and
    comparable: NaN equals NaN, lists become tuples."""
    present = [c for c in columns if c in table.column_names]
    values = {c: table.column(c).to_pylist() for c in present}
    for i in range(table.num_rows):
        yield tuple(_hashable(values[c][i]) if c in values else None for c in columns)


def _hashable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # NaN != NaN would make a row differ from itself
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def error_summary(exc: Exception) -> str:
    """The first line of a read error: delta-rs appends a native backtrace to some messages,
    and the first line says what failed."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _snapshot(table: Location, version: int | None = None) -> DeltaRsSnapshot:
    # The table where it is, as delta-rs finds it: the checker looks at the files a crash left.
    return DeltaRsSnapshot(table, open_delta_table(table, version=version))
