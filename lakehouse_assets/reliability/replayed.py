"""What a quarantine replay cut short still owes the quarantine, read from the logs.

A replay (:mod:`lakehouse_assets.io.replay`) appends the rows that now pass to the table, then
deletes them from the quarantine, each commit recording app transaction ``quarantine-replay``.
Between the two, its rows are in both tables but are the table's: the accounting takes them
out of the quarantine.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.location import Location
from lakehouse_assets.reliability import table_reader
from lakehouse_assets.storage import HistoryEntry
from lakehouse_assets.storage.delta_rs_snapshot import open_delta_table
from lakehouse_assets.storage.discovery import is_table

#: The app transaction replays are recorded under, in the table and in its quarantine.
REPLAY_APP = "quarantine-replay"
#: How a moved row is known in both tables: where it landed, and what it recorded.
ROW_IDENTITY = (SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN, "device_id", "mrn", "heartrate")


def is_replay(commit: HistoryEntry) -> bool:
    """Whether a commit is a quarantine replay's (not a streaming batch)."""
    return commit.query == REPLAY_APP


def owed_to_table(table: Location, quarantine: Location,
                  identity: tuple[str, ...] = ROW_IDENTITY) -> Counter[tuple[Any, ...]]:
    """The identities (``identity``'s columns) of rows the quarantine still shows but a
    replay already moved to the table: those of the table's replays the quarantine has not
    recorded yet. Both tables are folders on a disk or a store."""
    # From the app transaction, not the replay commits: those may be cleaned from the log.
    done = open_delta_table(quarantine).transaction_version(REPLAY_APP) if is_table(quarantine) else None
    done = -1 if done is None else done
    owed: Counter[tuple[Any, ...]] = Counter()
    for commit in table_reader.history(table):
        if not is_replay(commit) or commit.batch_id is None or commit.batch_id <= done:
            continue
        for added in table_reader.added_files(table, commit.version):
            owed.update(table_reader.row_tuples(table_reader.file_rows(table, added), identity))
    return owed
