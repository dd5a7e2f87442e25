"""AUTO CDC FROM SNAPSHOT: a table kept from full snapshots of a source, as Lakeflow's
``create_auto_cdc_from_snapshot_flow`` keeps it (docs/guides/cdc.md). Each snapshot is compared
with the one before it and the changes applied as any AUTO CDC batch
(:class:`~lakehouse_assets.cdc.sink.AutoCdcTable`). Snapshots apply in version order, each once:
their commits record the version as the snapshot source's app transaction (a snapshot whose state
commit is there is skipped), and changes come from two snapshots, never from the table, so a
replay computes the same changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.cdc.scd import column
from lakehouse_assets.cdc.sink import AutoCdcTable
from lakehouse_assets.cdc.spec import AutoCdc
from lakehouse_assets.storage.declared_types import DeclaredTypes
from lakehouse_assets.storage.engine import AppTransaction, CommitResult
from lakehouse_assets.storage.layout import TableLayout

if TYPE_CHECKING:
    from lakehouse_assets.storage.delta import DeltaTableStore

#: The columns of the change rows a snapshot makes: the snapshot's version and the operation.
SNAPSHOT_VERSION = "__snapshot_version"
SNAPSHOT_OP = "__snapshot_op"


@dataclass(frozen=True)
class Snapshot:
    """One full snapshot of the source: its version (they apply in increasing order) and a
    way to read its rows, called only if the table does not hold it yet."""

    version: int
    read: Callable[[], DataFrame]
    name: str = ""


@dataclass(frozen=True)
class SnapshotSource:
    """What an AUTO CDC FROM SNAPSHOT asset returns: every snapshot of ``source`` there is
    (those the table holds are skipped, unread)."""

    source: str
    snapshots: Sequence[Snapshot]


def snapshot_spec(keys: Sequence[str], stored_as_scd_type: int,
                  track_history_column_list: Sequence[str] | None = None) -> AutoCdc:
    """How the change rows of snapshots apply."""
    return AutoCdc(keys=keys, sequence_by=SNAPSHOT_VERSION, stored_as_scd_type=stored_as_scd_type,  # type: ignore[arg-type]
                   apply_as_deletes=f"{SNAPSHOT_OP} = 'DELETE'", except_column_list=[SNAPSHOT_OP, SNAPSHOT_VERSION],
                   track_history_column_list=track_history_column_list)


def snapshot_changes(snapshot: DataFrame, live: DataFrame | None, keys: Sequence[str], version: int) -> DataFrame:
    """The change rows that turn ``live`` (the snapshot before, None for the first) into ``snapshot``."""
    def changes(rows: DataFrame, op: str) -> DataFrame:
        return rows.withColumn(SNAPSHOT_OP, F.lit(op)).withColumn(SNAPSHOT_VERSION, F.lit(version).cast("long"))

    if live is None:
        return changes(snapshot, "UPSERT")
    live = live.select(*snapshot.columns)
    same_row = reduce(lambda a, b: a & b, [snapshot[c].eqNullSafe(live[c]) for c in snapshot.columns])
    same_key = reduce(lambda a, b: a & b, [live[k].eqNullSafe(snapshot[k]) for k in keys])
    upserts = snapshot.join(live, same_row, "left_anti")
    gone = live.join(snapshot, same_key, "left_anti").select(
        *[column(c) if c in keys else F.lit(None).cast(live.schema[c].dataType).alias(c) for c in live.columns])
    return changes(upserts, "UPSERT").unionByName(changes(gone, "DELETE"))


def apply_snapshots(store: DeltaTableStore, path: str, spec: AutoCdc, snapshots: Sequence[Snapshot], source: str,
                    metadata: dict[str, str], layout: TableLayout | None = None,
                    declared: DeclaredTypes | None = None) -> Iterator[tuple[Snapshot, CommitResult]]:
    """Apply the snapshots the table does not hold yet, in version order; yield each applied.
    The table is created with ``layout``, its rows cast to the
    ``declared`` column types."""
    table = AutoCdcTable(store, path, spec, layout or TableLayout(), declared)
    app_id = f"snapshots:{source}"
    held = store.committed_batch(table.state_path, app_id) if store.exists(table.state_path) else None
    previous: Snapshot | None = None
    for snapshot in sorted(snapshots, key=lambda s: s.version):
        if held is None or snapshot.version > held:
            rows = snapshot.read()
            before = previous.read() if previous is not None else None
            changes = snapshot_changes(rows, before, spec.keys, snapshot.version)
            yield snapshot, table.apply(changes, AppTransaction(app_id, snapshot.version),
                                        {**metadata, "lakehouse.snapshot": snapshot.name or str(snapshot.version)})
        previous = snapshot
