"""A landed file deleted between discovery and read, on the Dagster bronze asset path (issue 8):
the materialization names it in the run's log and in its metadata (``files_vanished``), with
what to do; the good file's records are in bronze once and the next run works."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.assets.bronze import bronze_table
from lakehouse_assets.ingestion import AutoLoaderOptions
from lakehouse_assets.io import DeltaIOManager
from lakehouse_assets.location import spark_file_uri
from lakehouse_assets.quality.rules import Severity, not_null
from lakehouse_assets.resource import LAKEHOUSE_RESOURCE, LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import IO_MANAGER_KEY
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata
from lakehouse_assets_tests.ingestion.helpers import file_uri, json_lines, land, recording
from lakehouse_assets_tests.reliability.test_bad_input_files import DeletingStore

# One file per micro-batch, so a file can be deleted after the listing gave it to the second
# batch and before that batch reads it.
ONE_FILE_PER_BATCH = AutoLoaderOptions(
    format="json", schema_hints="time DOUBLE, heartrate DOUBLE, mrn BIGINT, device_id BIGINT", max_files_per_trigger=1
)
# A counted expectation routes each batch through the store's write, where the file is deleted:
# Delta's own sink, which bronze uses without one, runs no Python between batches.
RECORDINGS = bronze_table(name="recordings", data_source="recordings", source_format="json", options=ONE_FILE_PER_BATCH,
                          expectations=[not_null("device_id", name="device_id_present", severity=Severity.WARN)])


class DeletingIOManager(DeltaIOManager):
    """The real IO manager over :class:`DeletingStore`: when a micro-batch commits, ``victim``
    is deleted, as a clean-up job racing the ingestion would."""

    victim: str

    def store(self) -> DeltaTableStore:
        return DeletingStore(Path(self.victim))


def test_a_file_deleted_between_listing_and_reading_is_named_by_the_bronze_materialization(
    spark: SparkSession, settings: LakehouseSettings
) -> None:
    landing = Path(settings.landing_path("recordings"))
    first = land(landing, "1.json", json_lines([recording(i) for i in range(3)]))
    doomed = land(landing, "2.json", json_lines([recording(10 + i) for i in range(3)]))
    os.utime(doomed, (time.time() + 5, time.time() + 5))  # listed after 1.json: in the second batch
    instance = dg.DagsterInstance.ephemeral()
    lakehouse = LakehouseResource.from_settings(LakehouseSettings.from_env())

    def materialize(io_manager: DeltaIOManager) -> dg.ExecuteInProcessResult:
        return dg.materialize([RECORDINGS], resources={LAKEHOUSE_RESOURCE: lakehouse, IO_MANAGER_KEY: io_manager}, instance=instance)

    result = materialize(DeletingIOManager(lakehouse=lakehouse, victim=str(doomed)))

    assert materialization_metadata(result)["bronze/recordings"]["files_vanished"] == [spark_file_uri(str(doomed))]
    warnings = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]
    assert any(
        spark_file_uri(str(doomed)) in w and "deleted" in w and "land it again under a new name" in w for w in warnings
    ), warnings
    assert sorted(f for (f,) in delta_rows(settings, "bronze", "recordings", ["_source_file"])) == [file_uri(first)] * 3

    again = land(landing, "2-again.json", json_lines([recording(10 + i) for i in range(3)]))
    result = materialize(DeltaIOManager(lakehouse=lakehouse))

    assert materialization_metadata(result)["bronze/recordings"]["files_vanished"] == []
    sources = sorted(f for (f,) in delta_rows(settings, "bronze", "recordings", ["_source_file"]))
    assert sources == sorted([file_uri(first)] * 3 + [file_uri(again)] * 3)
