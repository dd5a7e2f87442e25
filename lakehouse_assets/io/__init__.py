"""From asset to table: the Delta IO manager, the resolver of one output to one
:class:`~lakehouse_assets.io.table_run.TableRun`, and one handler per kind of output."""

from lakehouse_assets.io.delta_io_manager import DeltaIOManager
from lakehouse_assets.io.table_run import TableRef, TableRun, full_refresh, resolve_table_run

__all__ = ["DeltaIOManager", "TableRef", "TableRun", "full_refresh", "resolve_table_run"]
