"""The ``checkpoints_agree`` invariant: every streaming checkpoint agrees with the tables its
query writes (the table of its own name, a routed table's quarantine, and any table whose log
holds a batch of its query id)."""

from __future__ import annotations

from lakehouse_assets.location import Location
from lakehouse_assets.reliability import delta_files
from lakehouse_assets.reliability.flows import Flows
from lakehouse_assets.reliability.reading import table_path
from lakehouse_assets.reliability.report import InvariantResult
from lakehouse_assets.settings import CHECKPOINTS_DIR, FLOWS_DIR, LakehouseSettings
from lakehouse_assets.storage.discovery import discover_tables

CHECKPOINTS_AGREE = "checkpoints_agree"


def check_checkpoints_agree(settings: LakehouseSettings, flows: Flows) -> InvariantResult:
    """Every checkpoint under ``_checkpoints`` is readable and agrees with each table its
    query commits to: the table of its own name, the quarantine of a routed query, and any
    table whose log holds a batch of its query id."""
    from lakehouse_assets.checkpoints.checkpoint import Checkpoint
    from lakehouse_assets.errors import CheckpointMismatchError, CorruptCheckpointError
    from lakehouse_assets.storage import lakehouse_store

    result = InvariantResult(CHECKPOINTS_AGREE, "checkpoints and tables agree")
    folders = _checkpoint_folders(settings.root / CHECKPOINTS_DIR)
    if not folders:
        result.skipped = "no checkpoints yet"
        return result
    store = lakehouse_store(settings)
    writers = _tables_by_query(settings)
    for parts, folder in folders:
        name = ".".join(parts[:2])
        try:
            state = Checkpoint(str(folder), name).state()
        except CorruptCheckpointError as exc:
            result.add(name, str(exc))
            continue
        if state is None:
            continue
        tables = dict.fromkeys([name, *flows.quarantine_of(name), *writers.get(state.query_id or "", [])])
        for table in tables:
            if table not in result.checked:
                result.checked.append(table)
            try:
                Checkpoint(str(folder), name).validate([str(table_path(settings, table))], store)
            except CheckpointMismatchError as exc:
                result.add(table, str(exc))
            except Exception as exc:  # noqa: BLE001 - an unreadable table is versions_whole's finding too
                why = delta_files.error_summary(exc)
                result.add(table, f"cannot compare checkpoint {folder} with the table: {why}")
    return result


def _checkpoint_folders(base: Location) -> list[tuple[tuple[str, ...], Location]]:
    """The checkpoint folders under ``base``, each with its parts below it, in path order. A
    table's query keeps ``<layer>/<name>``; a table filled by several append flows, one
    checkpoint per flow under it (``<layer>/<name>/flows/<flow>``). Folders named ``.…`` (a
    damaged checkpoint a repair kept aside) are none."""
    found: list[tuple[tuple[str, ...], Location]] = []
    for layer in base.folders():
        for table in (base / layer).folders():
            if table.startswith(".") or table == FLOWS_DIR:
                continue
            found.append(((layer, table), base / layer / table))
            flows = base / layer / table / FLOWS_DIR
            found.extend(((layer, table, FLOWS_DIR, flow), flows / flow)
                         for flow in flows.folders() if not flow.startswith(".") and flow != FLOWS_DIR)
    return sorted(found, key=lambda item: item[0])


def _tables_by_query(settings: LakehouseSettings) -> dict[str, list[str]]:
    """For each streaming query id, the tables whose logs hold one of its batches."""
    found: dict[str, list[str]] = {}
    for name in discover_tables(settings.root):
        app_ids = {app for v in delta_files.log_versions(table_path(settings, name)) for app, _ in v.transactions()}
        for app in app_ids:
            found.setdefault(app, []).append(name)
    return found
