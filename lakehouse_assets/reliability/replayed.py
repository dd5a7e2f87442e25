"""What a quarantine replay cut short still owes the quarantine, read from the logs.

A replay (:mod:`lakehouse_assets.io.replay`) appends the rows that now pass to the table,
then deletes them from the quarantine; each commit records app transaction
``quarantine-replay`` with the replay's number. Between the two, the rows of a replay the
table holds and the quarantine does not are in both tables but are the table's: the
accounting takes them out of the quarantine. Read with the independent reader
(:mod:`.delta_files`): the commit files and the Parquet files they add.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow.parquet as pq

from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.location import Location, table_file_path
from lakehouse_assets.reliability import delta_files
from lakehouse_assets.storage.discovery import is_table

#: The app transaction replays are recorded under, in the table and in its quarantine.
REPLAY_APP = "quarantine-replay"
#: How a moved row is known in both tables: where it landed, and what it recorded.
ROW_IDENTITY = (SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN, "device_id", "mrn", "heartrate")


def is_replay(version: delta_files.LogVersion) -> bool:
    """Whether a commit is a quarantine replay's (not a streaming batch)."""
    return any(app == REPLAY_APP for app, _ in version.transactions())


def owed_to_table(table: Location, quarantine: Location,
                  identity: tuple[str, ...] = ROW_IDENTITY) -> Counter[tuple[Any, ...]]:
    """The identities (``identity``'s columns) of rows the quarantine still shows but a
    replay already moved to the table: those of the table's replays the quarantine has not
    recorded yet. Both tables are folders on a disk or a store."""
    # From the app transaction, not the replay commits: those may be cleaned from the log.
    done = delta_files.app_versions(quarantine).get(REPLAY_APP, -1) if is_table(quarantine) else -1
    owed: Counter[tuple[Any, ...]] = Counter()
    for version in delta_files.log_versions(table):
        if not any(app == REPLAY_APP and n > done for app, n in version.transactions()):
            continue
        for action in version.actions:
            if "add" in action:
                added = Location(table_file_path(str(table), action["add"]["path"]), table.store)
                rows = pq.read_table(added.path, filesystem=added.fs)
                owed.update(delta_files.row_tuples(rows, identity))
    return owed
