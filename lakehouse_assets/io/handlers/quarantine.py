"""The quarantine output of a routed table: its rows were written by the main table's query
(which also cleared it on a full refresh), so this output only reports, from the table's
log, what that query put there in this run. Each of the query's batches commits to the
quarantine, rows refused or none: the version reported is this run's last commit."""

from __future__ import annotations

from typing import Any

from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.run_report import run_report
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.outputs import QuarantineOf
from lakehouse_assets.storage import DeltaTableStore, run_commits


def report_quarantine(output: QuarantineOf, run: TableRun, store: DeltaTableStore, log: Any) -> Written:
    """What this run's routing query committed to the quarantine table."""
    commits = run_commits(store, str(run.table.path), run.run_id) if run.run_id else []
    return Written(commits[-1].version if commits else None, run_report(commits))
