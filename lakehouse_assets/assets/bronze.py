"""Bronze: raw landed records, ingested incrementally Auto Loader-style."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from lakehouse_assets.assets.table_asset import IncrementalSource, table_asset
from lakehouse_assets.ingestion import (
    AutoLoaderOptions,
    SourceFormat,
    autoload_stream,
    landing_warnings,
    restart_after_schema_evolution,
)
from lakehouse_assets.ingestion.readiness import hold_back
from lakehouse_assets.ingestion.state import unread_files
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark import SparkResource


def bronze_table(
    *,
    name: str,
    data_source: str,
    source_format: SourceFormat,
    options: AutoLoaderOptions | None = None,
    description: str | None = None,
) -> dg.AssetsDefinition:
    """A bronze table fed by the files landing at ``$LAKEHOUSE_ROOT/landing/<data_source>``,
    as the course's ``autoload_to_table(data_source, source_format, table_name,
    checkpoint_directory)``: the checkpoint and the stored schema are the table's own."""
    options = options or AutoLoaderOptions(format=source_format)
    if options.format != source_format:
        raise ValueError(f"bronze table {name}: source_format {source_format!r} disagrees with options.format")

    @table_asset(
        layer="bronze",
        name=name,
        deps=[["landing", data_source]],
        output_mode="append",
        merge_schema=True,
        description=description or f"Raw {data_source} files ingested incrementally ({source_format}).",
    )
    def _bronze(spark: SparkResource) -> IncrementalSource:
        settings = LakehouseSettings.from_env()
        checkpoint = settings.checkpoint_path("bronze", name)
        landing = settings.landing_path(data_source)
        if checkpoint.exists():
            # Files this run will not read, by name, with what to do: in the run's log.
            for message in landing_warnings(landing, options, checkpoint):
                dg.get_dagster_logger().warning(message)
        return IncrementalSource(
            build=lambda: autoload_stream(
                spark.spark_session,
                source_dir=settings.landing_path(data_source),
                options=options,
                schema_location=settings.schema_path("bronze", name),
                checkpoint_location=checkpoint,
            ),
            restart_when=restart_after_schema_evolution(options, checkpoint_location=checkpoint),
            # Without a checkpoint (first run) there is no telling: run the query. Nor without
            # the landing folder: the query's start then says that it is gone.
            has_new_data=lambda: _has_readable_files(landing, checkpoint, options)
            if checkpoint.exists() and landing.is_dir() else None,
        )

    return _bronze


def _has_readable_files(landing: Path, checkpoint: Path, options: AutoLoaderOptions) -> bool:
    """Whether the landing folder holds unread files a run would read (not held back)."""
    unread = unread_files(str(landing), str(checkpoint), options)
    return len(hold_back(unread)) < len(unread)


recordings = bronze_table(
    name="recordings",
    data_source="recordings",
    source_format="json",
    # The course hints `time DOUBLE`; the other columns are hinted with the course's declared
    # types too, because inference over a first file holding a bad value ("abc") would make
    # that column a string for good. With hints, a bad value is null and rescued instead.
    options=AutoLoaderOptions(
        format="json",
        schema_hints="time DOUBLE, heartrate DOUBLE, mrn BIGINT, device_id BIGINT",
        infer_column_types=True,
    ),
    description="Heart-rate recordings (device_id, mrn, time, heartrate) as landed, with "
    "_rescued_data for whatever did not fit, _source_file and _ingested_at.",
)
