"""Checking a checkpoint against the tables around it: the tables its query writes must hold
exactly the batches it says it wrote, and the Delta tables it reads must be the ones its
positions point into.

Every commit the exactly-once sink makes records ``(query id, batch id)`` as a Delta app
transaction, so the table says which batch of which query it holds last; the checkpoint must
agree, or a restarted query would skip batches the table never received (checkpoint ahead)
or skip new batches as if already written (checkpoint behind). Spark itself checks neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakehouse_assets.checkpoints.delta_offsets import DeltaSourcePosition, is_pre_connector_offset
from lakehouse_assets.checkpoints.logs import CheckpointState, read_batch_offsets, table_name_of
from lakehouse_assets.errors import CheckpointMismatchError, LegacyCheckpointError, SourceRecreatedError
from lakehouse_assets.location import Location
from lakehouse_assets.storage.discovery import tables_by_id

if TYPE_CHECKING:
    from lakehouse_assets.storage.delta import DeltaTableStore


def check_agreement(
    state: CheckpointState, table_path: str, store: DeltaTableStore, table_name: str | None = None
) -> None:
    """Raise :class:`~lakehouse_assets.errors.CheckpointMismatchError` unless the table at
    ``table_path`` holds exactly what the checkpoint says its query has written.

    With T the last batch the query committed to the table (its app transaction) and the
    checkpoint's last planned (P) and done (C) batches, they agree when T == C, or when
    T == P == C + 1: the run died after the Delta commit and before Spark recorded the
    batch, and the replay of batch P will be skipped by the sink. T < C: the checkpoint is
    ahead (the table was restored, rolled back or recreated, or the checkpoint is another
    table's). T > P: the checkpoint is behind (an older copy was put back): Spark would plan
    new batches with the numbers the table already holds, and the sink would drop them.
    """
    if state.query_id is None:
        return
    name = table_name or table_name_of(state.location)
    committed = -1 if state.last_committed_batch is None else state.last_committed_batch
    planned = -1 if state.last_planned_batch is None else state.last_planned_batch
    table_batch = store.committed_batch(str(table_path), state.query_id)
    held = -1 if table_batch is None else table_batch
    if held == committed or held == planned == committed + 1:
        return
    holds = (
        f"the table holds batch {held} of query {state.query_id} as its last"
        if held >= 0 else
        f"the table holds no batch of query {state.query_id}"
        + ("" if store.exists(str(table_path)) else " (there is no table at all)")
    )
    recovery = (
        f"Rebuild the checkpoint from what the table holds with `lakehouse repair {name}` (the old "
        f"checkpoint is kept aside), or full-refresh the table with `lakehouse reset {name}`."
    )
    if held < committed:
        message = (
            f"The checkpoint {state.location} is ahead of the Delta table {table_path}: it records "
            f"batch {committed} as done, but {holds}. The table was restored, rolled back or "
            f"recreated since, or the checkpoint belongs to another table; resuming would skip "
            f"what batches {held + 1}..{committed} read, which the table does not have. {recovery}"
        )
    elif held > planned:
        message = (
            f"The checkpoint {state.location} is behind the Delta table {table_path}: its last "
            f"planned batch is {planned} (last done {committed}), but {holds}. An older copy of "
            f"the checkpoint was put back; resuming would plan new batches under numbers the "
            f"table already holds, and they would be skipped as written: their rows would be "
            f"lost. {recovery}"
        )
    else:
        message = (
            f"The checkpoint {state.location} and the Delta table {table_path} disagree: the "
            f"checkpoint's last planned batch is {planned} and its last done batch {committed}, "
            f"but {holds}. {recovery}"
        )
    raise CheckpointMismatchError(message, checkpoint=state.location, table=str(table_path))


def check_sources(state: CheckpointState, store: DeltaTableStore, table_name: str | None = None,
                  root: Location | None = None) -> None:
    """Raise :class:`~lakehouse_assets.errors.SourceRecreatedError` when a Delta table the
    query reads is gone, or was recreated (a full refresh) since the checkpoint's last
    batch: the checkpoint's positions are versions of the old table.

    Delta's source names the table it reads by id (:mod:`~lakehouse_assets.checkpoints.delta_offsets`);
    a table under ``root`` (the lakehouse root) with that id is the one read. When none has
    it, the tables created since the checkpoint's last batch are the ones recreated.
    Other sources (files) are not checked here. Positions of the Delta source older releases
    used raise :class:`~lakehouse_assets.errors.LegacyCheckpointError` naming the reset that
    rebuilds the table.
    """
    if any(is_pre_connector_offset(offset) for offset in state.source_offsets):
        name = table_name or table_name_of(state.location)
        raise LegacyCheckpointError(
            f"{name}: checkpoint {state.location} holds positions of the Delta source that releases before "
            "Delta Lake's connector used, which Delta's streaming source cannot resume from. Rebuild the table "
            f"from its sources, with no run in progress: `lakehouse reset {name} --yes`, then materialize it "
            "and the tables it feeds.")
    where = f"{table_name or table_name_of(state.location)}: checkpoint {state.location}"
    positions = [p for p in (DeltaSourcePosition.parse(o, where) for o in state.source_offsets) if p is not None]
    if not positions or root is None:
        return
    tables = tables_by_id(root, store.table_id)
    gone = [p.table_id for p in positions if p.table_id not in tables]
    if not gone:
        return
    name = table_name or table_name_of(state.location)
    since = _batch_time(state)
    read_ids = {p.table_id for p in positions}
    recreated = [_name_under(path, root) for identity, path in sorted(tables.items(), key=lambda item: item[1])
                 if identity not in read_ids and since is not None and _created_after(store, path, since)]
    upstream = " or ".join(recreated) if recreated else f"the Delta table with id {gone[0]}"
    what = "was recreated, by a full refresh," if recreated else "no longer exists (or was recreated)"
    raise SourceRecreatedError(
        f"{name} streams from {upstream}, which {what} since {name} last read it: the positions in "
        f"checkpoint {state.location} are versions of the old table (id {gone[0]}), so resuming would "
        f"skip or repeat rows. Full-refresh {name} so it reads its source again from the start: "
        f"`lakehouse reset {name} --yes` (or run it with the full_refresh config), and the same for "
        f"the tables that stream from {name}."
    )


def _batch_time(state: CheckpointState) -> int | None:
    """When the checkpoint's last batch was planned (ms since the epoch)."""
    if state.last_planned_batch is None:
        return None
    offsets = read_batch_offsets(state.location, state.last_planned_batch)
    return offsets.timestamp_ms if offsets is not None else None


def _created_after(store: DeltaTableStore, path: str, since_ms: int) -> bool:
    """Whether the table at ``path`` was created (its version 0) after ``since_ms``."""
    oldest = store.history(path)[-1]
    return oldest.version == 0 and oldest.timestamp.timestamp() * 1000 > since_ms


def _name_under(path: str, root: Any) -> str:
    """``layer.name`` of a table path under the lakehouse root, else the path."""
    if root is not None:
        prefix = str(root).rstrip("/") + "/"
        if path.startswith(prefix) and path[len(prefix):].count("/") == 1:
            return path[len(prefix):].replace("/", ".")
    return path
