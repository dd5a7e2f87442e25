"""Tables: batch and streaming reads and writes of Delta tables.

Tables are written and streamed by Delta Lake's connector in Spark, and read without Spark
by delta-rs; everything above this package speaks of a :class:`DeltaTableStore` and table paths.
"""

from lakehouse_assets.location import local_path
from lakehouse_assets.storage._schema import type_sql
from lakehouse_assets.storage.declared_types import DeclaredTypes
from lakehouse_assets.storage.delta import DeltaTableStore
from lakehouse_assets.storage.delta_rs_snapshot import DeltaRsSnapshot
from lakehouse_assets.storage.engine import (
    AppTransaction,
    CommitResult,
    HistoryEntry,
    OptimizeResult,
    SnapshotFile,
    StreamOptions,
    StreamReader,
    VacuumResult,
    WriteMode,
)
from lakehouse_assets.storage.layout import TableLayout
from lakehouse_assets.storage.sink import DeltaSink, OutputMode, run_commits

__all__ = [
    "AppTransaction",
    "CommitResult",
    "DeclaredTypes",
    "DeltaRsSnapshot",
    "DeltaTableStore",
    "DeltaSink",
    "HistoryEntry",
    "OptimizeResult",
    "OutputMode",
    "SnapshotFile",
    "StreamOptions",
    "StreamReader",
    "TableLayout",
    "VacuumResult",
    "WriteMode",
    "local_path",
    "run_commits",
    "type_sql",
]
