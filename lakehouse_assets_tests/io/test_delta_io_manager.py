"""The Delta IO manager, one handler at a time: tiny assets materialized through Dagster with
the real IO manager, the shared SparkSession and real Delta tables under the test's lakehouse
root; every assertion reads the tables (or their checkpoints) back."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.assets.bronze import bronze_table
from lakehouse_assets.assets.routed_table_asset import routed_table_asset
from lakehouse_assets.assets.table_asset import batch_from, stream_from, table_asset
from lakehouse_assets.ingestion import AutoLoaderOptions
from lakehouse_assets.io import DeltaIOManager
from lakehouse_assets.outputs import IncrementalSource, RoutedRows
from lakehouse_assets.quality.quarantine import QUARANTINE_REASON
from lakehouse_assets.quality.silver import HEARTRATE_POSITIVE
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import IO_MANAGER_KEY, STREAM_INPUT_KEY, ColumnSource, TableSpec
from lakehouse_assets.storage import DeltaTableStore, StreamOptions
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata, observation_metadata

# -- upstream tables, written directly with the store (external assets to Dagster) -----------

PEOPLE = ("bronze", "io_people")
PEOPLE_SCHEMA = "id BIGINT, name STRING"
EVENTS = ("bronze", "io_events")
EVENTS_SCHEMA = "id BIGINT, value BIGINT"
READINGS = ("bronze", "io_readings")
READINGS_SCHEMA = "id BIGINT, heartrate DOUBLE"
LANDED = "io_landed"  # landing folder of the ingestion asset
LANDED_SCHEMA = "id BIGINT, value BIGINT"

UPSTREAM = [dg.AssetSpec(list(key)).with_io_manager_key(IO_MANAGER_KEY) for key in (PEOPLE, EVENTS, READINGS)]


# -- the assets under test ------------------------------------------------------------------


@table_asset(layer="silver", name="io_people_upper", ins={"people": batch_from(PEOPLE)})
def people_upper(people: DataFrame) -> DataFrame:
    """The people, names in capitals: a batch output, overwritten each run."""
    return people.select("id", F.upper("name").alias("name"))


@table_asset(layer="silver", name="io_people_merged", ins={"people": batch_from(PEOPLE)},
             write_mode="merge", merge_keys=["id"])
def people_merged(people: DataFrame) -> DataFrame:
    """The people, upserted by id: a batch output merged into the table."""
    return people.select("id", "name")


@table_asset(layer="silver", name="io_events_doubled", ins={"events": stream_from(EVENTS)},
             column_lineage={"id": [ColumnSource("bronze.io_events", "id")],
                             "doubled": [ColumnSource("bronze.io_events", "value")]})
def events_doubled(events: DataFrame) -> DataFrame:
    """Each event's value doubled: a streaming output, one incremental query."""
    return events.select("id", (F.col("value") * 2).alias("doubled"))


@routed_table_asset(
    layer="silver",
    name="io_readings_clean",
    quarantine_name="io_readings_quarantine",
    description="Readings with a positive heart rate.",
    quarantine_description="Readings refused, with the rules they failed.",
    ins={"readings": stream_from(READINGS)},
    expectations=[HEARTRATE_POSITIVE],
)
def readings_clean(readings: DataFrame) -> RoutedRows:
    """Readings routed by heartrate_positive."""
    return RoutedRows(
        rows=readings,
        passed_columns=["id", "heartrate"],
        quarantine_columns=["id", "heartrate"],
    )


@table_asset(layer="bronze", name="io_landed")
def landed(lakehouse: LakehouseResource) -> IncrementalSource:
    """JSON files landed under landing/io_landed: an ingestion output."""
    folder = str(LakehouseSettings.from_env().landing_path(LANDED))
    return IncrementalSource(build=lambda: lakehouse.spark_session.readStream.schema(LANDED_SCHEMA).json(folder))


autoloaded = bronze_table(
    name="io_autoloaded", data_source="io_autoloaded", source_format="json",
    options=AutoLoaderOptions(format="json", schema_hints="id BIGINT, value BIGINT"),
)


@table_asset(layer="silver", name="io_events_viewed", deps=[EVENTS])
def events_viewed(lakehouse: LakehouseResource) -> DataFrame:
    """The seeds' cells: a table by name read as a stream, made a temp view, transformed by a
    SQL temp view, and turned back into a stream with spark.table."""
    session = lakehouse.spark_session
    lakehouse.tables.sql("SELECT id, value FROM STREAM(bronze.io_events)").createOrReplaceTempView("events_raw_temp")
    session.sql("CREATE OR REPLACE TEMPORARY VIEW events_tenfold_temp AS "
                "SELECT id, value * 10 AS tenfold FROM events_raw_temp")
    return session.table("events_tenfold_temp")


@table_asset(layer="gold", name="io_views_seen", ins={"viewed": batch_from(["silver", "io_events_viewed"])})
def views_seen(lakehouse: LakehouseResource, viewed: DataFrame) -> DataFrame:
    """The temp views this body finds in the run's session: none, whatever ran before it."""
    session = lakehouse.spark_session
    names = sorted(row.viewName for row in session.sql("SHOW VIEWS").collect() if row.isTemporary)
    return session.createDataFrame([(",".join(names), viewed.count())], "views STRING, rows BIGINT")


@table_asset(layer="silver", name="io_events_throttled",
             ins={"events": stream_from(EVENTS, StreamOptions(max_files_per_trigger=1))})
def events_throttled(events: DataFrame) -> DataFrame:
    """The events, read one upstream file per micro-batch: stream options declared on the asset."""
    return events.select("id", "value")


@table_asset(layer="silver", name="io_events_once", trigger="once",
             ins={"events": stream_from(EVENTS, StreamOptions(max_files_per_trigger=1))})
def events_once(events: DataFrame) -> DataFrame:
    """The events in one micro-batch: a once trigger takes everything, rate limits aside."""
    return events.select("id", "value")


@table_asset(layer="gold", name="io_not_a_frame")
def not_a_frame():
    """Returns a dict where a DataFrame belongs."""
    return {"id": 1, "name": "not a DataFrame"}


# -- helpers --------------------------------------------------------------------------------


def materialize(*assets: Any, run_config: dict[str, Any] | None = None, raise_on_error: bool = True,
                instance: dg.DagsterInstance | None = None) -> dg.ExecuteInProcessResult:
    """Materialize ``assets`` with the real Delta IO manager (batch and stream inputs)."""
    spark_resource = LakehouseResource.from_settings(LakehouseSettings.from_env())
    return dg.materialize(
        [*assets, *UPSTREAM],
        resources={
            "lakehouse": spark_resource,
            IO_MANAGER_KEY: DeltaIOManager(lakehouse=spark_resource),
            STREAM_INPUT_KEY: DeltaIOManager(lakehouse=spark_resource, read_inputs_as="stream"),
        },
        instance=instance or dg.DagsterInstance.ephemeral(),
        run_config=run_config,
        raise_on_error=raise_on_error,
    )


def write_upstream(spark: SparkSession, store: DeltaTableStore, settings: LakehouseSettings,
                   key: Sequence[str], schema: str, rows: list[tuple], mode: str = "append") -> None:
    store.write(spark.createDataFrame(rows, schema), str(settings.table_path(*key)), mode=mode)


def table_path(settings: LakehouseSettings, layer: str, name: str) -> str:
    return str(settings.table_path(layer, name))


def failure_text(result: dg.ExecuteInProcessResult) -> str:
    """The messages of every failed step's error and of the errors it came from."""
    texts = []
    for event in result.all_events:
        if not event.is_step_failure:
            continue
        error = event.step_failure_data.error
        while error is not None:
            texts.append(f"{error.cls_name}: {error.message}")
            error = error.cause or error.context
    return "\n".join(texts)


def last_query(store: DeltaTableStore, path: str) -> str | None:
    """The streaming query that made the table's newest commit, as its history names it."""
    return store.history(path)[0].query


# -- batch ----------------------------------------------------------------------------------


def test_batch_overwrite_writes_the_rows_reports_the_table_and_replaces_them_next_run(spark, store, settings):
    write_upstream(spark, store, settings, PEOPLE, PEOPLE_SCHEMA, [(1, "ada"), (2, "bob"), (3, "cy")])

    first = materialization_metadata(materialize(people_upper))["silver/io_people_upper"]

    assert delta_rows(settings, "silver", "io_people_upper", ["id", "name"]) == [(1, "ADA"), (2, "BOB"), (3, "CY")]
    assert first["rows_written"] == 3
    assert first["dagster/row_count"] == 3
    assert first["delta_version"] == first["written_version"] == store.version(table_path(settings, "silver", "io_people_upper"))
    assert [(c.name, c.type) for c in first["dagster/column_schema"].columns] == [("id", "bigint"), ("name", "string")]

    write_upstream(spark, store, settings, PEOPLE, PEOPLE_SCHEMA, [(7, "dee"), (8, "eve")], mode="overwrite")
    second = materialization_metadata(materialize(people_upper))["silver/io_people_upper"]

    assert delta_rows(settings, "silver", "io_people_upper", ["id", "name"]) == [(7, "DEE"), (8, "EVE")]
    assert second["rows_written"] == 2
    assert second["dagster/row_count"] == 2
    assert second["delta_version"] == second["written_version"] == first["delta_version"] + 1


def test_batch_merge_updates_the_matching_row_and_inserts_the_new_one(spark, store, settings):
    write_upstream(spark, store, settings, PEOPLE, PEOPLE_SCHEMA, [(1, "ada"), (2, "bob")])
    materialize(people_merged)
    assert delta_rows(settings, "silver", "io_people_merged", ["id", "name"]) == [(1, "ada"), (2, "bob")]

    write_upstream(spark, store, settings, PEOPLE, PEOPLE_SCHEMA, [(2, "robert"), (3, "cy")], mode="overwrite")
    run = materialization_metadata(materialize(people_merged))["silver/io_people_merged"]

    assert delta_rows(settings, "silver", "io_people_merged", ["id", "name"]) == [(1, "ada"), (2, "robert"), (3, "cy")]
    assert run["rows_written"] == 2  # one updated, one inserted
    assert run["dagster/row_count"] == 3


# -- stream ---------------------------------------------------------------------------------


def test_stream_writes_everything_then_skips_when_nothing_is_new_then_writes_only_new_rows(spark, store, settings):
    path = table_path(settings, "silver", "io_events_doubled")
    upstream = table_path(settings, *EVENTS)
    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(1, 10), (2, 20), (3, 30)])
    instance = dg.DagsterInstance.ephemeral()  # the runs' record, as a deployment's instance keeps it

    first = materialization_metadata(materialize(events_doubled, instance=instance))["silver/io_events_doubled"]

    assert delta_rows(settings, "silver", "io_events_doubled", ["id", "doubled"]) == [(1, 20), (2, 40), (3, 60)]
    assert first["rows_written"] == 3
    assert first["micro_batches"] >= 1
    assert first["written_version"] == first["delta_version"] == store.version(path)
    # What the query read to: the upstream table as the run found it before starting it.
    assert first["reading"] == {"tables": {"bronze.io_events": {
        "table_id": store.table_id(upstream), "version": store.version(upstream)}}, "landed": {}}
    assert first["dagster/column_lineage"].deps_by_column["doubled"] == [
        dg.TableColumnDep(asset_key=dg.AssetKey(list(EVENTS)), column_name="value")]

    idle = materialize(events_doubled, instance=instance)

    # Nothing new: no query started, nothing committed, so no materialization; an observation
    # says why, at the version the table stands.
    assert materialization_metadata(idle) == {}
    observed = observation_metadata(idle)["silver/io_events_doubled"]
    assert "nothing new since version" in observed["not_written"] and "bronze.io_events" in observed["not_written"]
    assert observed["delta_version"] == first["delta_version"] == store.version(path)

    # Without the record (another Dagster instance) the query is started, finds nothing and
    # commits nothing.
    unrecorded = materialization_metadata(materialize(events_doubled)).get("silver/io_events_doubled", {})
    assert "rows_written" not in unrecorded and store.version(path) == first["delta_version"]

    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(4, 40), (5, 50)])
    third = materialization_metadata(materialize(events_doubled, instance=instance))["silver/io_events_doubled"]

    assert delta_rows(settings, "silver", "io_events_doubled", ["id", "doubled"]) == [
        (1, 20), (2, 40), (3, 60), (4, 80), (5, 100)]
    assert third["rows_written"] == 2
    assert third["delta_version"] == third["written_version"] > first["delta_version"]
    assert third["dagster/row_count"] == 5


def test_a_narrower_type_is_widened_into_the_table_and_a_wider_one_refused_naming_the_column(spark, store, settings):
    """Issue 17, item 6: an int into a bigint column is cast up (a safe widening); a bigint
    into the int column a table was made with stops the run with the project's error naming
    the table, the column, both types and the way out, never a JVM trace."""
    def typed(value_type: str) -> dg.AssetsDefinition:
        @table_asset(layer="silver", name="io_events_typed", ins={"events": stream_from(EVENTS)})
        def events_typed(events: DataFrame) -> DataFrame:
            return events.select("id", F.col("value").cast(value_type).alias("value"))
        return events_typed

    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(1, 10)])
    materialize(typed("bigint"))
    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(2, 20)])
    materialize(typed("int"))  # narrower than the table: widened

    assert delta_rows(settings, "silver", "io_events_typed", ["id", "value"]) == [(1, 10), (2, 20)]
    assert store.snapshot(table_path(settings, "silver", "io_events_typed")).schema()["value"].dataType.simpleString() \
        == "bigint"

    # Rebuilt with an int column, from the source.
    materialize(typed("int"), run_config={"ops": {"silver__io_events_typed": {"config": {"full_refresh": True}}}})
    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(3, 30)])
    refused = materialize(typed("bigint"), raise_on_error=False)

    assert not refused.success
    text = failure_text(refused)
    assert "SchemaMismatchError" in text and "io_events_typed" in text and "'value' is int in the table but bigint" in text
    assert "full-refresh" in text and "Py4JJavaError" not in text


# -- routed ---------------------------------------------------------------------------------


def test_routed_rows_go_to_the_table_or_to_quarantine_with_their_reason(spark, store, settings):
    readings = [(1, 72.0), (2, 0.0), (3, -4.0), (4, 88.5), (5, None)]
    write_upstream(spark, store, settings, READINGS, READINGS_SCHEMA, readings)

    run = materialization_metadata(materialize(readings_clean))

    clean = delta_rows(settings, "silver", "io_readings_clean", ["id", "heartrate"])
    quarantined = delta_rows(settings, "silver", "io_readings_quarantine", ["id", "heartrate", QUARANTINE_REASON])
    assert clean == [(1, 72.0), (4, 88.5)]
    assert quarantined == [(2, 0.0, "heartrate_positive"), (3, -4.0, "heartrate_positive"),
                           (5, None, "heartrate_positive")]
    assert len(clean) + len(quarantined) == len(readings)
    assert run["silver/io_readings_clean"]["rows_written"] == len(clean)
    assert run["silver/io_readings_quarantine"]["rows_written"] == len(quarantined)
    assert run["silver/io_readings_quarantine"]["dagster/row_count"] == len(quarantined)


# -- ingestion ------------------------------------------------------------------------------


def test_ingestion_source_writes_each_landed_file_once(spark, store, settings):
    landing = Path(settings.landing_path(LANDED))
    landing.mkdir(parents=True)
    (landing / "1.json").write_text('{"id": 1, "value": 10}\n{"id": 2, "value": 20}\n')

    first = materialization_metadata(materialize(landed))["bronze/io_landed"]

    assert delta_rows(settings, "bronze", "io_landed", ["id", "value"]) == [(1, 10), (2, 20)]
    assert first["rows_written"] == 2
    assert first["files_vanished"] == []

    (landing / "2.json").write_text('{"id": 3, "value": 30}\n')
    second = materialization_metadata(materialize(landed))["bronze/io_landed"]

    assert delta_rows(settings, "bronze", "io_landed", ["id", "value"]) == [(1, 10), (2, 20), (3, 30)]
    assert second["rows_written"] == 1


def test_bronze_asset_skips_an_empty_landing_then_stops_on_a_new_column_naming_it_then_goes_on(spark, store, settings):
    """The Auto Loader path of a bronze asset, through Dagster: nothing landed is a run that
    does nothing; a new column stops the run with the ingestion's own error (the column, the
    file, what happens next), not Spark's; the next run takes the column in."""
    path = table_path(settings, "bronze", "io_autoloaded")
    landing = Path(settings.landing_path("io_autoloaded"))
    landing.mkdir(parents=True)

    empty = materialize(autoloaded)
    assert empty.success and not store.exists(path)

    (landing / "1.json").write_text('{"id": 1, "value": 10}\n')
    assert materialization_metadata(materialize(autoloaded))["bronze/io_autoloaded"]["rows_written"] == 1

    (landing / "2.json").write_text('{"id": 2, "value": 20, "ward": "A"}\n')
    stopped = materialize(autoloaded, raise_on_error=False)
    assert not stopped.success
    text = failure_text(stopped)
    assert "SchemaEvolvedError" in text and "ward" in text and str(landing / "2.json") in text, text
    assert delta_rows(settings, "bronze", "io_autoloaded", ["id"]) == [(1,)]

    materialize(autoloaded)
    assert delta_rows(settings, "bronze", "io_autoloaded", ["id", "value", "ward"]) == [(1, 10, None), (2, 20, "A")]


def test_stream_options_declared_on_an_asset_reach_its_query_and_show_in_its_definition(spark, store, settings):
    for i in range(3):  # three commits of one file each
        write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(i, i)])

    run = materialization_metadata(materialize(events_throttled))["silver/io_events_throttled"]

    assert (run["micro_batches"], run["rows_written"]) == (3, 3)
    key = dg.AssetKey(["silver", "io_events_throttled"])
    declared = TableSpec.of(events_throttled.metadata_by_key[key])
    assert declared is not None
    assert declared.stream_options == {"bronze.io_events": StreamOptions(max_files_per_trigger=1)}


def test_a_once_trigger_takes_everything_in_one_batch_and_processing_time_runs_until_its_bound(spark, store, settings):
    for i in range(3):
        write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(i, i)])

    once = materialization_metadata(materialize(events_once))["silver/io_events_once"]
    assert (once["micro_batches"], once["rows_written"]) == (1, 3)

    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(3, 3)])
    op = events_doubled.node_def.name
    config = {"trigger": "processingTime", "processing_time": "1 second", "timeout_seconds": 4}
    bounded = materialization_metadata(materialize(events_doubled, run_config={"ops": {op: {"config": config}}}))
    assert bounded["silver/io_events_doubled"]["rows_written"] == 4
    assert bounded["silver/io_events_doubled"]["duration_seconds"] >= 4  # ran until its bound, then stopped


# -- tables by name and temp views in asset bodies -------------------------------------------


def test_temp_views_and_tables_by_name_work_in_a_body_and_never_reach_the_next_asset(spark, store, settings):
    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(1, 1), (2, 2)])
    first = materialization_metadata(materialize(events_viewed, views_seen))
    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(3, 3)])
    second = materialization_metadata(materialize(events_viewed, views_seen))

    assert delta_rows(settings, "silver", "io_events_viewed", ["id", "tenfold"]) == [(1, 10), (2, 20), (3, 30)]
    assert (first["silver/io_events_viewed"]["rows_written"], second["silver/io_events_viewed"]["rows_written"]) == (2, 1)
    assert delta_rows(settings, "gold", "io_views_seen", ["views", "rows"]) == [("", 3)]


# -- full refresh ---------------------------------------------------------------------------


def test_full_refresh_clears_table_and_checkpoint_and_rebuilds_from_the_source(spark, store, settings):
    path = table_path(settings, "silver", "io_events_doubled")
    checkpoint = Path(settings.checkpoint_path("silver", "io_events_doubled"))
    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(1, 10), (2, 20)])
    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(3, 30)])
    materialize(events_doubled)
    table_before, query_before = store.table_id(path), last_query(store, path)
    assert len(delta_rows(settings, "silver", "io_events_doubled", ["id"])) == 3

    op = events_doubled.node_def.name
    assert op == "silver__io_events_doubled"
    run = materialization_metadata(materialize(events_doubled, run_config={"ops": {op: {"config": {"full_refresh": True}}}}))

    assert delta_rows(settings, "silver", "io_events_doubled", ["id", "doubled"]) == [(1, 20), (2, 40), (3, 60)]
    refreshed = run["silver/io_events_doubled"]
    assert refreshed["rows_written"] == 3
    assert refreshed["dagster/row_count"] == 3
    assert store.table_id(path) != table_before  # the table was recreated
    assert last_query(store, path) != query_before  # by a new query, under a new checkpoint
    assert checkpoint.exists()


# -- failures -------------------------------------------------------------------------------


def test_a_damaged_checkpoint_stops_the_run_naming_the_file_and_leaves_the_table_alone(spark, store, settings):
    path = table_path(settings, "silver", "io_events_doubled")
    checkpoint = Path(settings.checkpoint_path("silver", "io_events_doubled"))
    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(1, 10), (2, 20)])
    materialize(events_doubled)
    version = store.version(path)
    for log in (checkpoint / "offsets").iterdir():  # damage what Spark reads to resume
        log.write_bytes(b"this is not an offsets file\x00\xff")
    write_upstream(spark, store, settings, EVENTS, EVENTS_SCHEMA, [(3, 30)])  # there is work to do

    result = materialize(events_doubled, raise_on_error=False)

    assert not result.success
    text = failure_text(result)
    assert "CorruptCheckpointError" in text, text
    assert str(checkpoint) in text and "damaged" in text, text
    assert "lakehouse reset silver.io_events_doubled" in text, text
    assert store.version(path) == version
    assert delta_rows(settings, "silver", "io_events_doubled", ["id", "doubled"]) == [(1, 20), (2, 40)]


def test_an_asset_returning_something_else_than_a_dataframe_fails_naming_its_table(spark, store, settings):
    result = materialize(not_a_frame, raise_on_error=False)

    assert not result.success
    text = failure_text(result)
    assert "gold.io_not_a_frame" in text and "returned dict" in text, text
    assert not store.exists(table_path(settings, "gold", "io_not_a_frame"))
