"""What a run left on disk, in a form two runs can be compared by: a killed run and a run
that an injected fault stopped at the same point, from the same lakehouse.

Per Delta table (states and quarantines included): each commit's operation and the streaming
batch it records (Delta's history, read with delta-rs), and the rows as a multiset, without the
columns a run's clock fills. Per streaming checkpoint: the batches its offsets and commits logs
hold (file names only: Spark's own bookkeeping, compared as it was left).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse_assets.location import locate
from lakehouse_assets.reliability.table_reader import history, read_rows, row_tuples
from lakehouse_assets.settings import CHECKPOINTS_DIR

#: The folder of a Delta table's log (found here on disk, not read).
DELTA_LOG = "_delta_log"
#: Filled from the clock of the run that wrote the row, not from what landed.
RUN_TIME_COLUMNS = frozenset({"_ingested_at"})


@dataclass(frozen=True)
class TableState:
    commits: tuple[tuple[int, str, str | None, int | None], ...]
    rows: Counter[tuple[Any, ...]]


@dataclass(frozen=True)
class DiskState:
    """The tables and checkpoints under a lakehouse root, by their path under it."""

    tables: dict[str, TableState]
    checkpoints: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]

    def differences(self, other: DiskState) -> list[str]:
        """Where ``other`` differs from this state, one line each (none: the same)."""
        found = []
        for name in sorted(self.tables.keys() | other.tables.keys()):
            mine, theirs = self.tables.get(name), other.tables.get(name)
            if mine is None or theirs is None:
                found.append(f"table {name}: only in {'the other' if mine is None else 'this'} state")
            elif mine.commits != theirs.commits:
                found.append(f"table {name}: commits {mine.commits[-3:]} != {theirs.commits[-3:]} (last three)")
            elif mine.rows != theirs.rows:
                found.append(f"table {name}: {sum((mine.rows - theirs.rows).values())} rows only here, "
                             f"{sum((theirs.rows - mine.rows).values())} only in the other")
        for name in sorted(self.checkpoints.keys() | other.checkpoints.keys()):
            if self.checkpoints.get(name) != other.checkpoints.get(name):
                found.append(f"checkpoint {name}: (offsets, commits) {self.checkpoints.get(name)} "
                             f"!= {other.checkpoints.get(name)}")
        return found


def disk_state(root: Path) -> DiskState:
    """The state of the lakehouse at ``root``."""
    tables = {}
    for log in sorted(root.rglob(DELTA_LOG)):
        table = log.parent
        relative = table.relative_to(root)
        if CHECKPOINTS_DIR in relative.parts:
            continue
        commits = tuple((c.version, c.operation, c.query, c.batch_id) for c in history(locate(table)))
        rows = read_rows(locate(table))
        columns = [c for c in rows.column_names if c not in RUN_TIME_COLUMNS]
        tables[str(relative)] = TableState(commits, Counter(row_tuples(rows, columns)))
    checkpoints = {}
    for offsets in sorted((root / CHECKPOINTS_DIR).rglob("offsets")):
        query = offsets.parent
        checkpoints[str(query.relative_to(root))] = (_batches(offsets), _batches(query / "commits"))
    return DiskState(tables, checkpoints)


def _batches(folder: Path) -> tuple[str, ...]:
    return tuple(sorted((p.name for p in folder.iterdir() if p.name.isdigit()), key=int)) if folder.is_dir() else ()
