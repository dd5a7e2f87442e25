"""A table kept as it stands (nothing new, or a landing folder holding no files) that a table
below it in the run still needs: nothing is written, and the table is reported as it is, so
that Dagster runs what reads it (:func:`lakehouse_assets.assets.table_asset.not_written`)."""

from __future__ import annotations

from typing import Any

import dagster as dg

from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.outputs import TableKept
from lakehouse_assets.storage import DeltaTableStore


def report_kept(output: TableKept, run: TableRun, store: DeltaTableStore, log: Any) -> Written:
    """Nothing written: the table's own metadata says what it holds, and this why."""
    return Written(None, {"not_written": dg.MetadataValue.text(output.reason)})
