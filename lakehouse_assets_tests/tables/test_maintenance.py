"""Tables maintained by name: under the table's write lock, with every reader found."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from lakehouse_assets.errors import TableBusyError, UnknownTableError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage.table_lock import table_lock
from lakehouse_assets.tables.maintenance import TableMaintenance
from lakehouse_assets_tests.cli.helpers import delta_offset, write_checkpoint


def test_maintenance_waits_for_the_writer_holding_the_table(spark: SparkSession, settings: LakehouseSettings) -> None:
    path = settings.table_path("bronze", "events")
    write_deltalake(str(path), pa.table({"id": [1]}))
    maintenance = TableMaintenance(spark, settings, lock_timeout_seconds=0.3)

    with table_lock(settings.root, "bronze.events", timeout_seconds=1, holder="a test writer"):
        with pytest.raises(TableBusyError, match="a test writer"):
            maintenance.optimize("bronze.events")
        with pytest.raises(TableBusyError):
            maintenance.vacuum("bronze.events", dry_run=True)
    assert maintenance.vacuum("bronze.events", retention=dt.timedelta(0), dry_run=True).files == ()
    with pytest.raises(UnknownTableError, match="bronze.events"):
        maintenance.optimize("bronze.nope")


def test_every_checkpoint_under_the_root_is_asked(spark: SparkSession, settings: LakehouseSettings) -> None:
    path = settings.table_path("bronze", "events")
    write_deltalake(str(path), pa.table({"id": [1]}))
    offset = delta_offset(path, 0)
    write_checkpoint(settings.root, "silver.one", committed=0, planned=0, offset=offset)
    write_checkpoint(settings.root, "gold.two", committed=0, planned=1, offset=offset)

    readers = TableMaintenance(spark, settings).vacuum("bronze.events", dry_run=True).readers

    assert sorted(r.name for r in readers) == ["gold.two", "silver.one"]


def test_the_state_tables_inside_a_table_are_maintained_with_it(spark: SparkSession, settings: LakehouseSettings) -> None:
    path = settings.table_path("silver", "current")
    write_deltalake(str(path), pa.table({"id": [1]}))
    for batch in range(3):  # a state table a merge rewrites each batch
        write_deltalake(str(path / "_cdc_state"), pa.table({"key": [batch]}), mode="append")
    (path / "_not_a_table").mkdir()
    maintenance = TableMaintenance(spark, settings)

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
