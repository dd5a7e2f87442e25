"""What was ingested, file by file (cloud_files_state), read from the tables the ingestion
writes: the distinct ``_source_file`` of their rows, through delta-rs, never Spark's checkpoint."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pyspark.sql import SparkSession

from lakehouse_assets.assets.bronze import bronze_loader
from lakehouse_assets.ingestion import AutoLoaderOptions, ingested_files, unread_files
from lakehouse_assets.ingestion.state import rewritten_files, vanished_message
from lakehouse_assets.location import spark_file_uri
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore

from .helpers import Bronze, by_source, file_uri, json_lines, recording


def test_the_files_a_table_holds_are_its_source_files_version_by_version(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    bronze = Bronze(spark, settings, store)
    landed = [bronze.land(f"{i}.json", json_lines([recording(i), recording(10 + i)])) for i in range(3)]
    bronze.run(AutoLoaderOptions(max_files_per_trigger=2))
    landed.append(bronze.land("3.json", json_lines([recording(3)])))
    bronze.run()

    sources = by_source(bronze.rows())
    assert ingested_files(store, [bronze.table]) == set(sources) == {file_uri(p) for p in landed}
    assert [len(sources[file_uri(p)]) for p in landed] == [2, 2, 2, 1]
    # At every version the table holds exactly the files its rows came from, and a file's
    # rows first appear in the version that first names it.
    versions = sorted(e.version for e in store.history(bronze.table))
    held = [ingested_files(store, [bronze.table], version=v) for v in versions]
    for version, files in zip(versions, held, strict=True):
        rows = store.read(spark, bronze.table, version=version).select("_source_file").distinct().collect()
        assert files == {r["_source_file"] for r in rows}
    assert [len(files) for files in held] == [2, 3, 4]
    assert all(before < after for before, after in zip(held, held[1:], strict=False))

    # What a run would read now, without starting one.
    options = AutoLoaderOptions()
    assert unread_files(str(bronze.landing), options, ingested_files(store, [bronze.table])) == []
    late = bronze.land("4.json", json_lines([recording(4)]))
    unread = unread_files(str(bronze.landing), options, ingested_files(store, [bronze.table]))
    assert [spark_file_uri(f.path) for f in unread] == [file_uri(late)]
    # Against an older version, the files committed after it are unread again.
    then = ingested_files(store, [bronze.table], version=versions[0])
    assert {spark_file_uri(f.path) for f in unread_files(str(bronze.landing), options, then)} == {
        file_uri(p) for p in [*landed, late]} - then


def test_every_table_of_the_ingestion_counts_and_a_table_without_the_column_holds_none(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    """A routed ingestion writes each record to its table or its quarantine: a file is
    ingested when either holds a row of it. A table not created yet, or one without the
    column, holds no files."""
    table = str(settings.table_path("bronze", "routed"))
    quarantine = str(settings.table_path("bronze", "routed_quarantine"))
    other = str(settings.table_path("silver", "no_source"))
    never = str(settings.table_path("bronze", "never_written"))
    store.write(spark.createDataFrame([(1, "file:/l/a.json"), (2, "file:/l/b.json")], "mrn long, _source_file string"),
                table)
    store.write(spark.createDataFrame([(3, "file:/l/b.json"), (4, "file:/l/c.json"), (5, None)],
                                      "mrn long, _source_file string"), quarantine)
    store.write(spark.createDataFrame([(6,)], "mrn long"), other)

    assert ingested_files(store, [table, quarantine]) == {"file:/l/a.json", "file:/l/b.json", "file:/l/c.json"}
    assert ingested_files(store, [quarantine]) == {"file:/l/b.json", "file:/l/c.json"}
    assert ingested_files(store, [other, never]) == set()
    assert ingested_files(store, [never, table]) == {"file:/l/a.json", "file:/l/b.json"}


def test_an_empty_file_reads_as_unread_and_starts_no_query(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    """A file holding no record is never a row: it stays unread, held back (content a writer
    adds later is read), and a run with nothing else new starts nothing."""
    bronze = Bronze(spark, settings, store)
    good = bronze.land("good.json", json_lines([recording(1)]))
    empty = bronze.land("empty.json", "")
    bronze.run()
    version = store.version(bronze.table)

    options = AutoLoaderOptions()
    assert ingested_files(store, [bronze.table]) == {file_uri(good)}
    unread = unread_files(str(bronze.landing), options, ingested_files(store, [bronze.table]))
    assert [spark_file_uri(f.path) for f in unread] == [file_uri(empty)]
    loader = bronze_loader(settings, store, name=bronze.name, data_source=bronze.name, options=options)
    assert loader.has_new_data() is False
    assert any("empty.json" in message for message in loader.warnings())
    assert bronze.run().progress == [] and store.version(bronze.table) == version

    empty.write_text(json_lines([recording(2)]))  # the writer adds its content after all
    assert bronze_loader(settings, store, name=bronze.name, data_source=bronze.name, options=options).has_new_data()
    assert bronze.run().input_rows == 1
    assert ingested_files(store, [bronze.table]) == {file_uri(good), file_uri(empty)}


def test_a_file_written_again_after_its_ingestion_is_named_and_not_read_again(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    bronze = Bronze(spark, settings, store)
    again = bronze.land("a.json", json_lines([recording(1)]))
    kept = bronze.land("b.json", json_lines([recording(2)]))
    bronze.run()
    options = AutoLoaderOptions()
    ingested = ingested_files(store, [bronze.table])
    assert rewritten_files(str(bronze.landing), options, ingested, store, [bronze.table]) == []

    bronze.land("a.json", json_lines([recording(1), recording(3)]))
    later = time.time() + 5  # after the commit, whatever the clocks' resolutions
    os.utime(again, (later, later))

    rewritten = rewritten_files(str(bronze.landing), options, ingested, store, [bronze.table])
    assert [spark_file_uri(f.path) for f in rewritten] == [file_uri(again)]
    assert file_uri(kept) not in {spark_file_uri(f.path) for f in rewritten}
    # Not unread: its name is ingested, and the run says why it is not read.
    assert unread_files(str(bronze.landing), options, ingested) == []
    loader = bronze_loader(settings, store, name=bronze.name, data_source=bronze.name, options=options)
    warnings = loader.warnings()
    assert len(warnings) == 1 and f"Not reading {file_uri(again)} again" in warnings[0]
    assert "new name" in warnings[0]
    # A table not created yet has rewritten nothing.
    never = str(settings.table_path("bronze", "never_written"))
    assert rewritten_files(str(bronze.landing), options, ingested, store, [never]) == []


def test_the_vanished_file_warning_names_the_file_the_table_and_what_to_do(tmp_path: Path) -> None:
    message = vanished_message("file:/l/gone.json", "bronze.recordings")
    assert "file:/l/gone.json" in message and "bronze.recordings" in message
    assert "land it again under a new name" in message
