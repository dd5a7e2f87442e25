"""What a materialization reports of what its run did, read from the commits it made.

The table's commits are the one record of a batch (:mod:`lakehouse_assets.storage.batch_record`):
each names its run, so a run's report is the sum of the commits carrying its id (and of its
quarantine's, for a routed table). Nothing is remembered from the run itself: on a Spark
Connect engine the batches run in the server's Python workers.

- ``rows_written``: rows the commits wrote (Delta's own metrics);
- ``rows_quarantined``: rows the quarantine's commits of the same run wrote;
- ``rows_processed``: rows the batches read, where a commit says: the rows its rules checked,
  or for an ingestion (one row per landed record) and a routed table (a row goes to the
  table or its quarantine) what they wrote. A query whose commits record neither (a
  windowed aggregate through Delta's own sink, which counts nothing per batch) does not
  report it;
- ``micro_batches``: the streaming batches committed;
- what each expectation counted, and what the run read (``reading``).

A run that committed nothing records no materialization at all
(:mod:`lakehouse_assets.assets.nothing_to_read`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg

from lakehouse_assets.quality.expectations import ExpectationCounts, counts_of_commits
from lakehouse_assets.quality.rules import Rule
from lakehouse_assets.storage import DeltaTableStore, HistoryEntry, run_commits
from lakehouse_assets.storage.batch_record import READS_FILES_KEY

#: The metadata entry naming what the run read before its query started.
READING = "reading"


def run_report(commits: Sequence[HistoryEntry], expectations: Sequence[Rule] = (),
               quarantined: Sequence[HistoryEntry] | None = None) -> dict[str, Any]:
    """What a materialization reports of its run's ``commits`` to the table (oldest first),
    and ``quarantined``, its commits to the table's quarantine (None: the table has none);
    nothing when it committed nothing."""
    if not commits:
        return {}
    written = sum(c.rows_written or 0 for c in commits)
    held = sum(c.rows_written or 0 for c in quarantined or ())
    counts = counts_of_commits(commits)
    metadata: dict[str, Any] = {
        "rows_written": dg.MetadataValue.int(written),
        "micro_batches": dg.MetadataValue.int(sum(1 for c in commits if c.batch_id is not None)),
    }
    processed = _rows_processed(commits, counts, written, held, routed=quarantined is not None)
    if processed is not None:
        metadata["rows_processed"] = dg.MetadataValue.int(processed)
    if quarantined is not None:
        metadata["rows_quarantined"] = dg.MetadataValue.int(held)
    if expectations:
        metadata.update(expectations_metadata(expectations, counts))
    reading = next((c.reading for c in reversed(commits) if c.reading is not None), None)
    if reading is not None:
        metadata[READING] = dg.MetadataValue.json(reading.metadata())
    return metadata


def table_run_report(store: DeltaTableStore, path: str, run_id: str | None, expectations: Sequence[Rule] = (),
                     quarantine_path: str | None = None) -> dict[str, Any]:
    """:func:`run_report` of run ``run_id``'s commits to the table at ``path`` (and its
    quarantine's at ``quarantine_path``), read from their logs."""
    if run_id is None:
        return {}
    quarantined = run_commits(store, quarantine_path, run_id) if quarantine_path else None
    return run_report(run_commits(store, path, run_id), expectations, quarantined)


def _rows_processed(commits: Sequence[HistoryEntry], counts: ExpectationCounts, written: int, held: int, *,
                    routed: bool) -> int | None:
    if counts.rows:
        return counts.rows
    if routed:
        return written + held
    if all(c.custom_metadata.get(READS_FILES_KEY) for c in commits):
        return written
    return None


def expectations_metadata(rules: Sequence[Rule], counts: ExpectationCounts) -> dict[str, Any]:
    """Per expectation, the rows of this materialization that passed and failed it (numbers
    the UI plots across materializations), and the same as one table."""
    if not rules:
        return {}
    metadata: dict[str, Any] = {}
    lines = ["| expectation | on violation | passed | failed |", "| --- | --- | --- | --- |"]
    for rule in rules:
        passed, failed = counts.passed(rule.name), counts.failed.get(rule.name, 0)
        metadata[f"expectations/{rule.name}/passed"] = dg.MetadataValue.int(passed)
        metadata[f"expectations/{rule.name}/failed"] = dg.MetadataValue.int(failed)
        lines.append(f"| {rule.name} | {rule.severity.on_violation} | {passed} | {failed} |")
    metadata["expectations"] = dg.MetadataValue.md("\n".join(lines))
    metadata["expectations/rows_checked"] = dg.MetadataValue.int(counts.rows)
    return metadata
