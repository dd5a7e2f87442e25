"""What a table's writes already judged: each micro-batch's commit records how many of its rows
failed each expectation and how many of those it wrote (:mod:`~lakehouse_assets.quality.expectations`),
so a check over the rows those commits wrote reads the counts, not the rows."""

from __future__ import annotations

from lakehouse_assets.quality.evaluation import Judged
from lakehouse_assets.quality.expectations import ExpectationCounts
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.storage.batch_record import EXPECTATIONS_KEY
from lakehouse_assets.storage.changes import ChangePlan
from lakehouse_assets.storage.history import newest_first

# Operations whose commits add, change and remove no row.
_NO_ROW_CHANGED = frozenset({"CREATE TABLE", "OPTIMIZE", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "ADD COLUMNS",
                             "CHANGE COLUMN", "CLUSTER BY", "VACUUM START", "VACUUM END"})


def rows_covered(store: DeltaTableStore, plan: ChangePlan) -> int | None:
    """How many rows ``plan`` covers, by the log's statistics of its files (None: not all say)."""
    snapshot = store.snapshot(plan.path, version=plan.latest_version)
    if plan.whole_table:
        return snapshot.row_count()
    files = set(plan.files)
    added = [f.num_records for f in snapshot.files() if f.path in files]
    return None if None in added else sum(n or 0 for n in added)


def judged_by_writes(store: DeltaTableStore, plan: ChangePlan, rows: int | None) -> Judged | None:
    """What the writes counted of the ``rows`` ``plan`` covers, for the rules every one of them
    counted: the commits of its range, newest first (for the whole table, back to the first
    or to the last that replaced the table), each wrote rows with its expectation counts
    (rows read, failing, and failing written) or changed no row, and together they wrote
    ``rows``. None when they did not (a write that counts nothing, a replay, a merge or a
    delete): the rows are read."""
    written, counted = 0, []
    for commit in newest_first(store, plan.path):
        if commit.version > plan.latest_version:
            continue
        if commit.version < plan.first_version:
            break
        text = commit.custom_metadata.get(EXPECTATIONS_KEY)
        counts = ExpectationCounts.from_json(str(text)) if text else None
        if counts is not None and counts.kept is not None:
            written += commit.rows_written or 0  # a batch of no rows may have no metrics
            counted.append(counts)
            if str(commit.parameters.get("mode", "")).lower() == "overwrite":
                break  # the rows before it are gone
        elif commit.rows_written != 0 and commit.operation not in _NO_ROW_CHANGED:
            return None
    return Judged(written, sum(counted[1:], counted[0])) if counted and written == rows else None
