"""The ``events_once`` invariant: each batch a table's query committed is in the event log
exactly once.

The table's own log is the truth (each batch's app transaction); the event log is read with
the independent reader (:mod:`.delta_files`), not the code that wrote it.
"""

from __future__ import annotations

from collections import Counter

from lakehouse_assets.reliability import delta_files
from lakehouse_assets.reliability.report import InvariantResult
from lakehouse_assets.settings import CHECKPOINTS_DIR, LakehouseSettings
from lakehouse_assets.storage.discovery import is_table
from lakehouse_assets.storage.event_log import EVENT_LOG_TABLE, event_log_path

EVENTS_ONCE = "events_once"


def check_events_once(settings: LakehouseSettings, *, pending_ok: bool = False) -> InvariantResult:
    """Each batch a table's query committed (an app transaction in the table's log) has
    exactly one ``committed`` row in the event log (with ``pending_ok``: at most one, as
    after a crash, before the table's next run logs it)."""
    result = InvariantResult(EVENTS_ONCE, "every committed batch is in the event log exactly once")
    base = settings.root / CHECKPOINTS_DIR
    # A damaged checkpoint kept by a repair (".<name>.damaged-<time>") is no table's.
    queried = sorted(f"{layer}.{name}" for layer in base.folders() for name in (base / layer).folders()
                     if not name.startswith("."))
    log = event_log_path(settings.root)
    logged: Counter[tuple[str, str, int]] = Counter()
    logged_at: dict[tuple[str, str, int], int] = {}  # the table version each logged batch names
    if is_table(log):
        columns = ["table", "query_id", "batch_id", "status", "table_version"]
        try:
            rows = delta_files.read_rows(log, columns)
        except Exception as exc:  # noqa: BLE001 - a damaged log is a finding, not a crash
            result.add(EVENT_LOG_TABLE, f"cannot read the event log at {log}: {delta_files.error_summary(exc)}")
            return result
        for t, q, b, status, version in delta_files.row_tuples(rows, columns):
            if status == "committed" and b is not None:
                logged[(t, q, b)] += 1
                logged_at[(t, q, b)] = -1 if version is None else int(version)
    if not queried:
        result.skipped = "no streaming tables yet"
        return result
    for name in queried:
        path = settings.table_path(*name.split("."))
        if not is_table(path):
            continue
        versions = delta_files.log_versions(path)
        committed = {(app, batch) for v in versions for app, batch in v.transactions()}
        # Commit files older than the log's retention are cleaned away (VACUUM, delta-rs at a
        # log checkpoint): the batches they held can no longer be told apart from ones never
        # committed, so only the batches of the versions still in the log are checked.
        first_kept = versions[0].version if versions else 0
        twice = [f"query {q} batch {b} x{n}" for (t, q, b), n in logged.items() if t == name and n > 1]
        if twice:
            result.add(name, f"{len(twice)} batches are logged more than once", twice)
        missing = sorted(f"query {q} batch {b}" for q, b in committed if (name, q, b) not in logged)
        if missing and not pending_ok:
            result.add(name, f"{len(missing)} committed batches are not in the event log", missing)
        queries = {q for q, _ in committed}
        extra = [f"query {q} batch {b}" for (t, q, b) in logged
                 if t == name and q in queries and (q, b) not in committed and logged_at[(t, q, b)] >= first_kept]
        if extra:
            result.add(name, f"{len(extra)} logged batches were never committed to the table", extra)
    return result
