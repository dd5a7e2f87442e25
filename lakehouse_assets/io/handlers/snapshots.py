"""Snapshots of a source: each one the table does not hold yet, compared with the one before
and applied as AUTO CDC changes, in version order, once each."""

from __future__ import annotations

from typing import Any

import dagster as dg

from lakehouse_assets.cdc.snapshots import SnapshotSource, apply_snapshots
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.storage import DeltaTableStore


def write_snapshots(output: SnapshotSource, run: TableRun, store: DeltaTableStore, log: Any) -> Written:
    """Apply the snapshots of ``output`` that the table does not hold yet."""
    if run.spec.auto_cdc is None:
        raise LakehouseError(f"{run.table.table_name} returned snapshots, but its asset says nothing of how to "
                             "apply them: declare it with auto_cdc_from_snapshot_table(...)")
    applied = []
    for snapshot, commit in apply_snapshots(store, str(run.table.path), run.spec.auto_cdc, output.snapshots,
                                            output.source, run.stamp_metadata(store), run.spec.layout,
                                            run.spec.declared_types):
        log.info(f"{run.table.table_name}: applied snapshot {snapshot.version} ({snapshot.name}) "
                 f"as version {commit.version}")
        applied.append((snapshot, commit))
    if not applied:
        log.info(f"{run.table.table_name}: no new snapshot of {output.source}")
    versions = [c.version for _, c in applied if c.version is not None]
    return Written(max(versions) if versions else None, {
        "snapshots_applied": dg.MetadataValue.int(len(applied)),
        "snapshots_seen": dg.MetadataValue.int(len(output.snapshots)),
        "snapshots": dg.MetadataValue.json([{"version": s.version, "name": s.name} for s, _ in applied]),
    })
