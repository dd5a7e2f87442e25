"""Tables maintained by name: under the table's write lock, with every reader found."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from lakehouse_assets.errors import TableBusyError, UnknownTableError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore, StreamReader
from lakehouse_assets.storage.batch_record import TableVersion
from lakehouse_assets.storage.table_lock import table_lock
from lakehouse_assets.tables.maintenance import TableMaintenance
from lakehouse_assets_tests.tables.readings import record_reading


def test_maintenance_waits_for_the_writer_holding_the_table(spark: SparkSession, settings: LakehouseSettings,
                                                           store: DeltaTableStore) -> None:
    path = Path(settings.table_path("bronze", "events"))
    write_deltalake(str(path), pa.table({"id": [1]}))
    maintenance = TableMaintenance(spark, settings, None, store, lock_timeout_seconds=0.3)

    with table_lock(settings.root, "bronze.events", timeout_seconds=1, holder="a test writer"):
        with pytest.raises(TableBusyError, match="a test writer"):
            maintenance.optimize("bronze.events")
        with pytest.raises(TableBusyError):
            maintenance.vacuum("bronze.events", dry_run=True)
    assert maintenance.vacuum("bronze.events", retention=dt.timedelta(0), dry_run=True).files == ()
    with pytest.raises(UnknownTableError, match="bronze.events"):
        maintenance.optimize("bronze.nope")


def test_every_checkpoint_under_the_root_is_asked_at_what_its_table_recorded_reading(
        spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore) -> None:
    path = Path(settings.table_path("bronze", "events"))
    write_deltalake(str(path), pa.table({"id": [1]}))
    write_deltalake(str(path), pa.table({"id": [2]}), mode="append")
    events = TableVersion(str(DeltaTable(str(path)).metadata().id), 0)
    instance = dg.DagsterInstance.ephemeral()
    recorded = {
        "silver.one": {"bronze.events": events},
        "gold.two": {"bronze.events": TableVersion(events.table_id, 1), "silver.one": TableVersion("x", 3)},
        "silver.other": {"bronze.others": TableVersion("y", 4)},  # reads another table
        "silver.old": {"bronze.events": TableVersion("dropped-since", 9)},  # read a table since dropped
        "bronze.events": {},  # a query of landed files
    }
    for table, read in recorded.items():
        record_reading(settings, instance, table, read)
    # gold.late's last run died before it completed: what it read is not known.
    record_reading(settings, instance, "gold.late", {"bronze.others": TableVersion("y", 4)}, completed=False)
    for table in [*recorded, "gold.unknown", "gold.late"]:  # gold.unknown: no table, no run records it
        Path(settings.checkpoint_path(*table.split("."))).mkdir(parents=True)
    (settings.root / "_checkpoints" / "silver" / ".one.damaged-1").mkdir()  # hidden: not a query's

    readers = TableMaintenance(spark, settings, instance, store).vacuum("bronze.events", dry_run=True).readers

    assert sorted((r.name, r.version) for r in readers) == [
        ("gold.late", None), ("gold.two", 1), ("gold.unknown", None), ("silver.one", 0)]
    assert {r.name: r.checkpoint for r in readers}["gold.two"] == str(settings.checkpoint_path("gold", "two"))
    # Without an instance no query's position is known.
    unknown = TableMaintenance(spark, settings, None, store).readers("bronze.events")
    assert all(r.version is None for r in unknown) and len(unknown) == 6
    assert StreamReader("gold.two", None, str(settings.checkpoint_path("gold", "two"))) in unknown


def test_the_state_tables_inside_a_table_are_maintained_with_it(spark: SparkSession, settings: LakehouseSettings,
                                                               store: DeltaTableStore) -> None:
    path = Path(settings.table_path("silver", "current"))
    write_deltalake(str(path), pa.table({"id": [1]}))
    for batch in range(3):  # a state table a merge rewrites each batch
        write_deltalake(str(path / "_cdc_state"), pa.table({"key": [batch]}), mode="append")
    (path / "_not_a_table").mkdir()
    maintenance = TableMaintenance(spark, settings, None, store)

    assert maintenance.targets("silver.current") == ["silver.current", "silver.current/_cdc_state"]
    compacted = maintenance.optimize("silver.current/_cdc_state")
    vacuumed = maintenance.vacuum("silver.current/_cdc_state", retention=dt.timedelta(0))

    assert (compacted.files_removed, compacted.files_added) == (3, 1)
    assert len(vacuumed.files) == 3 and len(list((path / "_cdc_state").glob("*.parquet"))) == 1
    assert DeltaTable(str(path)).version() == 0  # the table itself untouched
    with pytest.raises(UnknownTableError):
        maintenance.path("silver.current/_not_a_table")
    with pytest.raises(UnknownTableError):
        maintenance.path("silver.current/../current")
