"""Tables: batch and streaming reads and writes of Delta tables.

Only this package knows that Delta is committed with delta-rs; everything above it speaks
of a :class:`TableStore` and table paths.
"""

from lakehouse_assets.storage._delta_log import DELTA_LOG
from lakehouse_assets.storage.delta_rs import DeltaRsTableStore
from lakehouse_assets.storage.engine import (
    AppTransaction,
    CommitResult,
    HistoryEntry,
    OptimizeResult,
    SnapshotFile,
    StreamOptions,
    StreamReader,
    TableSnapshot,
    TableStore,
    VacuumResult,
    WriteMode,
)
from lakehouse_assets.storage.sink import DeltaSink, OutputMode, run_commits

__all__ = [
    "AppTransaction",
    "CommitResult",
    "DELTA_LOG",
    "DeltaRsTableStore",
    "DeltaSink",
    "HistoryEntry",
    "OptimizeResult",
    "OutputMode",
    "SnapshotFile",
    "StreamOptions",
    "StreamReader",
    "TableSnapshot",
    "TableStore",
    "VacuumResult",
    "WriteMode",
    "run_commits",
]
