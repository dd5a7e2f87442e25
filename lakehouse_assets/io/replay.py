"""Quarantine replay: a routed table's quarantined rows re-evaluated against today's rules and
lookups; the rows that now pass move to the table, each exactly once.

The rows are routed again by the asset itself: its body runs with the quarantined rows in
place of its streamed input (its other inputs, the lookups, read as they stand now), and its
rules and duplicate check decide, as they decide for a micro-batch. Replay ``n`` then:

1. appends the rows that now pass to the table, in one commit recording app transaction
   ``quarantine-replay`` version ``n``;
2. deletes them from the quarantine (a Delta ``MERGE INTO``), in one commit recording the same.

Between the two commits a moved row is in both tables, and the table's log says which: the
rows of a replay the table holds and the quarantine does not are no longer the quarantine's.
The accounting (bronze = table + quarantine, :mod:`lakehouse_assets.reliability.replayed`)
reads it so, and holds at every moment; the next replay, or a rerun after a crash, finishes
step 2 before anything else. A row is known by where it landed and what it recorded
(:data:`ROW_IDENTITY`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.engine.client import engine_errors
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.faults import fault_point
from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.io.table_run import TableRef, TableRun, table_run_of
from lakehouse_assets.outputs import RoutedRows
from lakehouse_assets.quality.duplicates import mark_duplicates
from lakehouse_assets.quality.expectations import enforce
from lakehouse_assets.quality.quarantine import QUARANTINE_REASON, dropped_by, route, split_routed
from lakehouse_assets.reliability.replayed import REPLAY_APP, ROW_IDENTITY
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import STREAM_INPUT_KEY, TableRunConfig, TableSpec
from lakehouse_assets.storage import AppTransaction, DeltaTableStore
from lakehouse_assets.storage.batch_record import BATCH_METADATA_PREFIX, RUN_KEY
from lakehouse_assets.storage.table_lock import table_locks
from lakehouse_assets.tables.catalog import register_tables
from lakehouse_assets.tables.session_views import drop_temp_views

# How long a replay waits for a run writing the table or its quarantine.
_LOCK_TIMEOUT_SECONDS = 900.0
#: Commit metadata of a replay's table commit: the quarantined rows it re-evaluated (the rows it
#: moved are the rows the commit wrote).
REEVALUATED_KEY = f"{BATCH_METADATA_PREFIX}replay.reevaluated"


@dataclass(frozen=True)
class ReplayResult:
    """What one replay did: its number (None when nothing passed), the rows it moved, the
    rows left in the quarantine, and whether it first finished a replay a crash cut short."""

    table: str
    replay: int | None
    moved: int
    still_quarantined: int
    finished_earlier: int | None = None


def routed_table_assets(assets: Sequence[Any], *, replayable: bool = False) -> dict[str, dg.AssetsDefinition]:
    """The routed table assets among ``assets``, by the name of the table they route to (only
    those a replay can route again, with ``replayable``)."""
    found = {}
    for asset in assets:
        if not isinstance(asset, dg.AssetsDefinition):
            continue
        for key in asset.keys:
            spec = TableSpec.of(asset.metadata_by_key.get(key))
            if spec is not None and spec.quarantine and not (replayable and spec.pipeline):
                found[".".join(key.path)] = asset
    return found


def replay_quarantine(asset: dg.AssetsDefinition, spark: SparkSession, settings: LakehouseSettings,
                      store: DeltaTableStore, run_id: str | None = None) -> ReplayResult:
    """Re-evaluate the quarantined rows of ``asset``'s table and move those that now pass,
    exactly once, under both tables' write locks."""
    run = _table_run(asset, settings, run_id)
    assert run.quarantine is not None  # found by its quarantine table
    if run.spec.pipeline:
        raise LakehouseError(
            f"{run.table.table_name} comes from a Lakeflow pipeline, whose quarantine holds its flow's output rows, "
            "not its input: replaying them is not supported yet. Fix the rule or the data, then `lakehouse reset "
            f"{run.table.table_name}` and materialize it again to route every row anew.")
    table, quarantine = str(run.table.path), str(run.quarantine.path)
    register_tables(spark, settings, store)  # the tables the asset's body may name (a routed SQL query's lookups)
    with table_locks(run.root, run.lock_names, timeout_seconds=_LOCK_TIMEOUT_SECONDS,
                     holder=f"the quarantine replay of {run.table.table_name}"):
        finished = _finish_pending(store, spark, run)
        if not store.exists(quarantine):
            return ReplayResult(run.table.table_name, None, 0, 0, finished)
        # Both tables read at the version they stand at now: Spark recomputes a cached
        # DataFrame when a table it reads is written, and the replay writes both.
        held = store.read(spark, quarantine, version=store.version(quarantine)).persist()
        try:
            passed = _passing_now(asset, run, spark, store, held).persist()
            try:
                identity = row_identity(run, passed.columns, held.columns)
                moved = passed.count()
                if moved == 0:
                    return ReplayResult(run.table.table_name, None, 0, held.count(), finished)
                replay = (store.committed_batch(table, REPLAY_APP) if store.exists(table) else None)
                number = 0 if replay is None else replay + 1
                reevaluated = held.count()
                store.write(passed, table, mode="append", merge_schema=run.spec.merge_schema,
                            transaction=AppTransaction(REPLAY_APP, number), operation="QUARANTINE REPLAY",
                            metadata={REEVALUATED_KEY: str(reevaluated), **({RUN_KEY: run_id} if run_id else {})})
                fault_point("replay.table_committed")
                _remove_from_quarantine(store, spark, quarantine, passed.select(*identity), number)
                return ReplayResult(run.table.table_name, number, moved, reevaluated - moved, finished)
            finally:
                passed.unpersist()
        finally:
            held.unpersist()
            drop_temp_views(spark)  # the asset body's, as the IO manager clears them after a run


def _table_run(asset: dg.AssetsDefinition, settings: LakehouseSettings, run_id: str | None) -> TableRun:
    spec = _routed_spec(asset)
    return table_run_of(dg.AssetKey([spec.layer, spec.name]), spec, TableRunConfig(), settings, run_id)


def _routed_spec(asset: dg.AssetsDefinition) -> TableSpec:
    """The spec of ``asset``'s routed table (the one with a quarantine)."""
    for key in asset.keys:
        spec = TableSpec.of(asset.metadata_by_key.get(key))
        if spec is not None and spec.quarantine:
            return spec
    raise LakehouseError(f"Asset {asset.node_def.name} routes to no quarantine: there is nothing to replay")


def _passing_now(asset: dg.AssetsDefinition, run: TableRun, spark: SparkSession, store: DeltaTableStore,
                 held: DataFrame) -> DataFrame:
    """The quarantined rows ``held`` that pass the asset's rules today, as the table keeps them."""
    routed = _route_with(asset, spark, store, run, held.drop(QUARANTINE_REASON))
    rules = routed.expectations
    marked = route(routed.rows, rules)
    enforce(marked, rules, run.table.table_name, dropped_by=dropped_by())  # a FAIL rule stops the replay
    if routed.unique_by:
        path = str(run.table.path)
        table_rows = store.read(spark, path, version=store.version(path)) if store.exists(path) else None
        marked = mark_duplicates(marked, QUARANTINE_REASON, routed.unique_by, table_rows)
    passed, _ = split_routed(marked, passed_columns=routed.passed_columns,
                             quarantine_columns=routed.quarantine_columns)
    return passed


def _route_with(asset: dg.AssetsDefinition, spark: SparkSession, store: DeltaTableStore, run: TableRun,
                rows: DataFrame) -> RoutedRows:
    """What the asset's body returns given ``rows`` as its streamed input, and its other
    inputs as their tables stand."""
    inputs: dict[str, DataFrame] = {}
    for name, input_def in asset.node_def.input_dict.items():
        key = asset.node_keys_by_input_name[name]
        if input_def.dagster_type.is_nothing:
            continue  # a table the body reads by name (a SQL query's lookup), not an input
        if getattr(input_def, "input_manager_key", None) == STREAM_INPUT_KEY:
            inputs[name] = rows
        else:
            upstream = str(TableRef.of(key, run.settings).path)
            inputs[name] = store.read(spark, upstream)
    body = asset.op.compute_fn.decorated_fn  # type: ignore[union-attr]
    for output in body(**inputs):
        if isinstance(output.value, RoutedRows):
            return output.value
    raise LakehouseError(f"Asset {asset.node_def.name} returned no routed rows to replay the quarantine with")


def row_identity(run: TableRun, table_columns: Sequence[str], quarantine_columns: Sequence[str]) -> list[str]:
    """How a moved row is known in both tables: the columns of :data:`ROW_IDENTITY` both keep
    (each table passes them through as its row landed), where it landed at least: a routed
    SQL table keeps ``_source_file`` and ``_source_line`` beside its query's columns."""
    identity = [c for c in ROW_IDENTITY if c in table_columns and c in quarantine_columns]
    lacking = [c for c in (SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN) if c not in identity]
    if lacking:
        assert run.quarantine is not None
        raise LakehouseError(
            f"Cannot replay the quarantine of {run.table.table_name}: {run.table.table_name} or "
            f"{run.quarantine.table_name} lacks {', '.join(lacking)}, so a moved row could not be told apart in "
            "both. Tables written before they kept where each row landed: `lakehouse reset` them to rebuild.")
    return identity


def _finish_pending(store: DeltaTableStore, spark: SparkSession, run: TableRun) -> int | None:
    """Finish a replay the table holds and the quarantine does not (a crash between its two
    commits): remove its rows from the quarantine. The replay's number when its quarantine
    commit was pending, else None."""
    assert run.quarantine is not None
    table, quarantine = str(run.table.path), str(run.quarantine.path)
    done_in_table = store.committed_batch(table, REPLAY_APP) if store.exists(table) else None
    if done_in_table is None:
        return None
    done_in_quarantine = store.committed_batch(quarantine, REPLAY_APP) if store.exists(quarantine) else None
    if done_in_quarantine is not None and done_in_quarantine >= done_in_table:
        return None
    commit = next(e for e in store.history(table) if e.query == REPLAY_APP and e.batch_id == done_in_table)
    before = store.read(spark, table, version=commit.version - 1) if commit.version > 0 else None
    after = store.read(spark, table, version=commit.version)
    identity = row_identity(run, after.columns, store.read(spark, quarantine).columns
                            if store.exists(quarantine) else after.columns)
    moved = after.select(*identity)
    if before is not None:
        moved = moved.exceptAll(before.select(*identity))
    _remove_from_quarantine(store, spark, quarantine, moved, done_in_table)
    return done_in_table


def _remove_from_quarantine(store: DeltaTableStore, spark: SparkSession, quarantine: str, moved: DataFrame,
                            replay: int) -> None:
    """Delete the rows ``moved`` (their identities: its columns) from the quarantine, recording ``replay``."""
    nothing = store.read(spark, quarantine).limit(0)
    store.merge(nothing, quarantine, keys=moved.columns, replacing=moved,
                transaction=AppTransaction(REPLAY_APP, replay), operation="QUARANTINE REPLAY")


def replay_job(asset: dg.AssetsDefinition) -> dg.JobDefinition:
    """A job replaying the quarantine of ``asset``'s table (``quarantine_replay_<layer>__<name>``),
    reporting what moved as materializations of the table and its quarantine."""
    spec = _routed_spec(asset)
    assert spec.quarantine is not None
    name = spec.table.replace(".", "__")
    main_key, quarantine_key = dg.AssetKey([spec.layer, spec.name]), dg.AssetKey(spec.quarantine.split("."))

    @dg.op(name=f"replay_{name}_quarantine", required_resource_keys={"lakehouse"}, out={},
           description=f"Moves the quarantined rows of {spec.table} that pass its rules and lookups now")
    def replay(context):  # type: ignore[no-untyped-def]  # Dagster refuses a string annotation here
        lakehouse = context.resources.lakehouse
        with engine_errors(lakehouse.settings()):
            result = replay_quarantine(asset, lakehouse.spark_session, lakehouse.settings(), lakehouse.store(),
                                       context.run_id)
        context.log.info(f"{result.table}: replay {result.replay} moved {result.moved} rows; "
                         f"{result.still_quarantined} stay quarantined")
        metadata = {"rows_replayed": dg.MetadataValue.int(result.moved),
                    "rows_still_quarantined": dg.MetadataValue.int(result.still_quarantined)}
        if result.replay is not None:
            yield dg.AssetMaterialization(asset_key=main_key, metadata=metadata,
                                          description=f"Quarantine replay {result.replay}")
            yield dg.AssetMaterialization(asset_key=quarantine_key, metadata=metadata,
                                          description=f"Quarantine replay {result.replay}")

    @dg.job(name=f"quarantine_replay_{name}",
            description=f"Re-evaluates {spec.quarantine} against today's rules and lookups; rows that "
                        f"pass now move to {spec.table}, exactly once")
    def job() -> None:
        replay()

    return job
