"""Opening a Delta table with delta-rs, and reading one of its versions without Spark.

Commands, invariant checks and run metadata read tables here (delta-rs lists the files,
pyarrow reads them), so they work in a process that has no Spark session and never touch
the write path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFound
from pyspark.sql import types as T

from lakehouse_assets.errors import LakehouseError, TableNotFoundError
from lakehouse_assets.location import Location, table_file_path
from lakehouse_assets.storage._schema import arrow_to_spark
from lakehouse_assets.storage.engine import SnapshotFile

if TYPE_CHECKING:
    import pyarrow.compute as pc
    import pyarrow.dataset as pads


def open_delta_table(path: Location, *, version: int | None = None) -> DeltaTable:
    """The Delta table at ``path`` (on a disk, or on the store its location names), at its
    latest version or at ``version``; errors name the table, the versions it has, and what to
    read instead."""
    try:
        table = DeltaTable(str(path), storage_options=path.delta_rs_options)
    except DeltaTableNotFound as exc:
        raise TableNotFoundError(str(path)) from exc
    if version is not None:
        latest = table.version()
        if not 0 <= version <= latest:
            raise LakehouseError(
                f"Delta table {path} has no version {version}: its versions run from 0 to {latest}. "
                "See its history for what each version holds."
            )
        try:
            table.load_as_version(version)
        except DeltaError as exc:
            raise LakehouseError(
                f"Version {version} of Delta table {path} can no longer be read ({exc}); "
                "its log or files were cleaned up. Read a later version."
            ) from exc
    return table


def spark_schema(table: DeltaTable) -> T.StructType:
    """A delta-rs table's schema, as Spark types."""
    return arrow_to_spark(pa.schema(table.schema().to_arrow()))


class DeltaRsSnapshot:
    """One version of a table, read by delta-rs and pyarrow without Spark: what commands,
    checks and run metadata need (rows, files, statistics) in a process with no Spark session."""

    def __init__(self, location: Location, table: DeltaTable) -> None:
        self.location = location
        self.path = str(location)
        self.version = table.version()
        self._table = table

    @property
    def table_id(self) -> str:
        """The table's Delta id (a table dropped and created again at the path has a new one)."""
        return str(self._table.metadata().id)

    @property
    def partition_columns(self) -> list[str]:
        """The columns the table is partitioned by (none: not partitioned)."""
        return list(self._table.metadata().partition_columns)

    def plain_files(self) -> bool:
        """Whether Spark can read this version's rows straight from its data files as Parquet:
        the protocol asks readers for nothing more (reader version 1: no column mapping, no
        deletion vectors)."""
        return self._table.protocol().min_reader_version < 2

    def column_names(self) -> list[str]:
        """The table's columns at this version."""
        return [field.name for field in self._table.schema().fields]

    def schema(self) -> T.StructType:
        """The table's schema at this version, as Spark types."""
        return spark_schema(self._table)

    def files(self) -> list[SnapshotFile]:
        """The data files of this version, with the size and row count the log states."""
        return [
            SnapshotFile(
                path=table_file_path(self.path, str(add["path"])),
                relative_path=str(add["path"]),
                size=None if add.get("size_bytes") is None else int(add["size_bytes"]),
                num_records=None if add.get("num_records") is None else int(add["num_records"]),
            )
            for add in pa.table(self._table.get_add_actions(flatten=True)).to_pylist()
        ]

    def row_count(self) -> int | None:
        """Rows at this version, summed from the log's per-file statistics."""
        counts = [file.num_records for file in self.files()]
        return None if None in counts else sum(count or 0 for count in counts)

    def to_arrow(self, columns: Sequence[str] | None = None, *, limit: int | None = None,
                 where: pc.Expression | None = None) -> pa.Table:
        """The rows of this version (all columns, or ``columns``), those matching ``where``
        if given, the first ``limit`` if given. ``where`` is pushed into the scan: files whose
        statistics rule it out are not read."""
        dataset = self._dataset()
        selected = None if columns is None else list(columns)
        if limit is not None:
            return dataset.head(limit, columns=selected, filter=where)
        return dataset.to_table(columns=selected, filter=where)

    def _dataset(self) -> pads.Dataset:
        # pyarrow.dataset is imported by delta-rs here, when rows are read: importing it up
        # front would cost every process that imports storage (Spark's Python workers running
        # the sink and the source among them) about 50 MiB.
        # Files are read through pyarrow's own file system, not delta-rs's default Python
        # file-system handler: with that handler a process that read rows aborts at exit now
        # and then ("terminate called without an active exception", exit 134, or a segfault),
        # which would break the exit codes scripts rely on.
        return self._table.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(self.location.path, self.location.fs))


__all__ = ["DeltaRsSnapshot", "open_delta_table", "spark_schema"]
