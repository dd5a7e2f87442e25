"""Auto Loader-style ingestion end to end: real files, a real Spark session, a real Delta table."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.ingestion import (
    AutoLoaderOptions,
    SchemaEvolutionPolicy,
    SchemaEvolvedError,
    SchemaStore,
    UnknownColumnsError,
    autoload_stream,
    ingested_files,
    unread_files,
)
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaSink, DeltaTableStore
from lakehouse_assets.streaming import run_stream

from .helpers import BOM, Bronze, by_source, file_uri, json_lines, recording, rescued


def test_each_file_once_and_later_files_by_the_next_run(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    bronze = Bronze(spark, settings, store)
    first = [bronze.land(f"{i:04d}.json", json_lines([recording(i)])) for i in range(1000)]

    run1 = bronze.run()
    later = [bronze.land(f"later-{i}.json", json_lines([recording(5000 + i)])) for i in range(10)]
    run2 = bronze.run()

    rows = bronze.rows()
    assert (run1.input_rows, run2.input_rows) == (1000, 10)
    assert len(rows) == 1010
    sources = by_source(rows)
    assert sorted(sources) == sorted(file_uri(p) for p in first + later)
    assert all(len(file_rows) == 1 for file_rows in sources.values())
    assert {r["mrn"] for r in rows} == {str(recording(i)["mrn"]) for i in [*range(1000), *range(5000, 5010)]}
    # Ingestion state, read from the table: every file, and the later ones first in the
    # version the second run committed.
    assert ingested_files(store, [bronze.table]) == {file_uri(p) for p in first + later}
    assert ingested_files(store, [bronze.table], version=run1.last_version) == {file_uri(p) for p in first}
    assert run2.last_version is not None and run2.last_version > (run1.last_version or 0)
    assert unread_files(str(bronze.landing), AutoLoaderOptions(), ingested_files(store, [bronze.table])) == []


# Ten records in five files: two good, one malformed line, two wrong types, an empty file, a BOM.
BASE_FILES = {
    "good.json": json_lines([recording(1), recording(2), recording(3)]),
    "malformed.json": json_lines([recording(4), '{"device_id": 5, "mrn": 100', recording(6)]),
    "wrong_type.json": json_lines([recording(7, heartrate="n/a"), recording(8, time="yesterday")]),
    "empty.json": "",
    "bom.json": BOM + json_lines([recording(9), recording(10)]).encode(),
}
BASE_RECORDS = 10
NEW_COLUMN_FILE = json_lines([recording(11, spo2=97.5), recording(12, spo2=98.5)])
FIXED_FILE = json_lines([recording(11), recording(12)])


def _check_base_rows(rows: list[dict], landing: Path) -> None:
    rows = [r for r in rows if r["_source_file"] in {file_uri(landing / name) for name in BASE_FILES}]
    sources = by_source(rows)
    assert file_uri(landing / "empty.json") not in sources
    malformed = [r for r in sources[file_uri(landing / "malformed.json")] if r["mrn"] is None]
    assert len(malformed) == 1
    assert [malformed[0][c] for c in ("device_id", "heartrate", "mrn", "time")] == [None] * 4
    assert rescued(malformed[0]) == {"_raw": '{"device_id": 5, "mrn": 100', "_file": file_uri(landing / "malformed.json")}
    wrong = {r["mrn"]: r for r in sources[file_uri(landing / "wrong_type.json")]}
    assert wrong[recording(7)["mrn"]]["heartrate"] is None
    assert rescued(wrong[recording(7)["mrn"]]) == {"heartrate": "n/a", "_file": file_uri(landing / "wrong_type.json")}
    assert wrong[recording(8)["mrn"]]["time"] is None
    assert rescued(wrong[recording(8)["mrn"]])["time"] == "yesterday"
    bom = sources[file_uri(landing / "bom.json")]
    assert [(r["device_id"], r["_rescued_data"]) for r in bom] == [(recording(9)["device_id"], None), (recording(10)["device_id"], None)]
    good = [r for r in rows if r["_rescued_data"] is None]
    assert len(good) == 7 and all(r["_ingested_at"] is not None for r in rows)


@pytest.mark.parametrize(
    ("mode", "continue_on_new_columns"),
    [("addNewColumns", False), ("addNewColumns", True), ("rescue", False), ("failOnNewColumns", False), ("none", False)],
)
def test_bad_records_and_a_new_column_in_every_evolution_mode(
    spark: SparkSession,
    settings: LakehouseSettings,
    store: DeltaTableStore,
    mode: str,
    continue_on_new_columns: bool,
) -> None:
    bronze = Bronze(spark, settings, store)
    # The hints keep the wrong values from making their columns strings at inference.
    options = AutoLoaderOptions(
        schema_hints="time DOUBLE, heartrate DOUBLE",
        infer_column_types=True,
        schema_evolution_mode=mode,  # type: ignore[arg-type]
        continue_on_new_columns=continue_on_new_columns,
    )
    for name, content in BASE_FILES.items():
        bronze.land(name, content)

    bronze.run(options)
    assert bronze.count() == BASE_RECORDS
    _check_base_rows(bronze.rows(), bronze.landing)
    assert bronze.column_types() == {
        "device_id": "bigint", "heartrate": "double", "mrn": "bigint", "time": "double",
        "_rescued_data": "string", "_source_file": "string", "_source_line": "bigint", "_ingested_at": "timestamp",
    }
    # An empty file is held back (not marked read) so that content a writer adds later is read.
    assert file_uri(bronze.landing / "empty.json") not in ingested_files(store, [bronze.table])

    new_file = bronze.land("new_column.json", NEW_COLUMN_FILE)
    schemas = SchemaStore(bronze.schema_location)
    if mode == "addNewColumns" and not continue_on_new_columns:
        with pytest.raises(SchemaEvolvedError, match="spo2") as stopped:
            bronze.run(options)
        assert stopped.value.columns == ["spo2"] and stopped.value.files == [file_uri(new_file)]
        assert bronze.count() == BASE_RECORDS
        assert dict((f.name, f.dataType.simpleString()) for f in schemas.latest().schema.fields)["spo2"] == "double"
        bronze.run(options)
    elif mode == "failOnNewColumns":
        for _ in range(2):  # and keeps stopping
            with pytest.raises(UnknownColumnsError, match="spo2"):
                bronze.run(options)
        assert bronze.count() == BASE_RECORDS and schemas.versions() == [0]
        new_file.write_text(FIXED_FILE)  # the file is fixed where it lies
        bronze.run(options)
    else:
        run = bronze.run(options)
        assert run.restarts == (1 if continue_on_new_columns else 0)

    rows = bronze.rows()
    assert len(rows) == BASE_RECORDS + 2  # every landed record is a bronze row, in every mode
    _check_base_rows(rows, bronze.landing)
    new_rows = by_source(rows)[file_uri(new_file)]
    if mode == "addNewColumns":
        assert sorted(r["spo2"] for r in new_rows) == [97.5, 98.5] and schemas.versions() == [0, 1]
        assert all(r["spo2"] is None for r in rows if r not in new_rows)
    elif mode == "rescue":
        assert sorted(rescued(r)["spo2"] for r in new_rows) == ["97.5", "98.5"] and "spo2" not in rows[0]
    else:
        assert all(r["_rescued_data"] is None for r in new_rows) and "spo2" not in rows[0]
    assert schemas.versions() == ([0, 1] if mode == "addNewColumns" else [0])


def test_the_asset_layer_path_stream_and_restart_policy(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    """autoload_stream run by the caller, with the restart policy and nothing else (no list of
    unread files for the policy to type the new columns from)."""
    bronze = Bronze(spark, settings, store)
    options = AutoLoaderOptions(infer_column_types=True, continue_on_new_columns=True)
    bronze.land("1.json", json_lines([recording(1)]))
    bronze.land("2.json", json_lines([recording(2)]))
    run = run_stream(
        lambda: autoload_stream(spark, source_dir=bronze.landing, options=options, schema_location=bronze.schema_location),
        DeltaSink(store, bronze.table, merge_schema=True),
        checkpoint_location=bronze.checkpoint,
        restart_when=SchemaEvolutionPolicy(spark, options),
    )
    assert run.input_rows == 2

    bronze.land("3.json", json_lines([recording(3, ward="A")]))
    bronze.land("4.json", json_lines([recording(4, bed=7)]))
    run = run_stream(
        lambda: autoload_stream(spark, source_dir=bronze.landing, options=options, schema_location=bronze.schema_location),
        DeltaSink(store, bronze.table, merge_schema=True),
        checkpoint_location=bronze.checkpoint,
        restart_when=SchemaEvolutionPolicy(spark, options),
    )
    rows = {r["mrn"]: r for r in bronze.rows()}
    assert len(rows) == 4 and 1 <= run.restarts <= 2  # one file at a time without the unread files
    assert (rows[recording(3)["mrn"]]["ward"], rows[recording(4)["mrn"]]["bed"]) == ("A", 7)


def test_rate_limits_split_a_backlog_into_batches(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    by_files = Bronze(spark, settings, store, name="by_files")
    by_bytes = Bronze(spark, settings, store, name="by_bytes")
    for i in range(10):
        content = json_lines([recording(i)])
        by_files.land(f"{i}.json", content)
        by_bytes.land(f"{i}.json", content)
    size = len(json_lines([recording(0)]).encode())

    files_run = by_files.run(AutoLoaderOptions(max_files_per_trigger=3))
    bytes_run = by_bytes.run(AutoLoaderOptions(max_bytes_per_trigger=size * 4))

    assert [p["numInputRows"] for p in files_run.progress if p["numInputRows"]] == [3, 3, 3, 1]
    assert files_run.batches == 4 and by_files.count() == 10
    assert bytes_run.batches >= 3 and max(p["numInputRows"] for p in bytes_run.progress) <= 4
    assert by_bytes.count() == 10
    # Each batch is one commit, and the files its rows came from appear in it, 3 at a time.
    commits = sorted(store.history(by_files.table), key=lambda c: c.version)
    assert [c.batch_id for c in commits] == [0, 1, 2, 3]
    held = [len(ingested_files(store, [by_files.table], version=c.version)) for c in commits]
    assert held == [3, 6, 9, 10]


def test_a_file_landing_during_a_run_is_taken_by_this_run_or_the_next(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    bronze = Bronze(spark, settings, store)
    for i in range(6):
        bronze.land(f"before-{i}.json", json_lines([recording(i)]))
    landed_during: list[str] = []

    def keep_landing() -> None:
        for i in range(8):
            landed_during.append(file_uri(bronze.land(f"during-{i:02d}.json", json_lines([recording(100 + i)]))))
            time.sleep(0.2)

    lander = threading.Thread(target=keep_landing)
    lander.start()
    run1 = bronze.run(AutoLoaderOptions(max_files_per_trigger=2))
    lander.join()
    run2 = bronze.run(AutoLoaderOptions(max_files_per_trigger=2))

    sources = by_source(bronze.rows())
    assert run1.input_rows + run2.input_rows == 14
    assert all(len(rows) == 1 for rows in sources.values()) and len(sources) == 14
    assert set(landed_during) <= set(sources)


def test_hidden_and_in_progress_files_are_never_read(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    bronze = Bronze(spark, settings, store)
    bronze.land("a.json", json_lines([recording(1)]))
    for name in [".hidden.json", "_meta.json", "b.json.tmp", "c.json.partial"]:
        (bronze.landing / name).write_text("this is not json\n")
    (bronze.landing / "d.json.tmp").write_text(json_lines([recording(4)]))

    bronze.run()
    os.replace(bronze.landing / "d.json.tmp", bronze.landing / "d.json")  # the writer finished
    bronze.run()

    assert sorted(by_source(bronze.rows())) == [file_uri(bronze.landing / "a.json"), file_uri(bronze.landing / "d.json")]
    assert sorted(ingested_files(store, [bronze.table])) == sorted(by_source(bronze.rows()))


def test_nothing_landed_is_an_empty_run(spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore) -> None:
    bronze = Bronze(spark, settings, store)
    run = bronze.run()
    assert (run.batches, run.input_rows, store.exists(bronze.table)) == (0, 0, False)
    assert ingested_files(store, [bronze.table]) == set()


def test_fail_on_new_columns_goes_on_once_the_schema_has_them(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    bronze = Bronze(spark, settings, store)
    bronze.land("1.json", json_lines([recording(1)]))
    strict = AutoLoaderOptions(schema_evolution_mode="failOnNewColumns")
    bronze.run(strict)
    bronze.land("2.json", NEW_COLUMN_FILE)
    with pytest.raises(UnknownColumnsError) as stopped:
        bronze.run(strict)
    assert stopped.value.columns == ["spo2"] and "schema hints" in str(stopped.value)

    bronze.run(AutoLoaderOptions(schema_evolution_mode="failOnNewColumns", schema_hints="spo2 DOUBLE"))

    assert sorted(r["spo2"] for r in bronze.rows() if r["spo2"] is not None) == [97.5, 98.5]
    assert bronze.count() == 3 and bronze.column_types()["spo2"] == "double"


def test_a_late_file_with_an_old_modification_time_is_still_ingested(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    """Spark's file source skips, by default, files 7 days older than the newest it has seen:
    a backfill copied with its original times would be lost without a word."""
    bronze = Bronze(spark, settings, store)
    bronze.land("today.json", json_lines([recording(1)]))
    bronze.run()
    backfill = bronze.land("last-year.json", json_lines([recording(2)]))
    a_year_ago = time.time() - 365 * 86400
    os.utime(backfill, (a_year_ago, a_year_ago))

    assert bronze.run().input_rows == 1
    assert file_uri(backfill) in by_source(bronze.rows())


def test_an_ingestion_without_expectations_appends_through_deltas_own_sink_exactly_once(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore
) -> None:
    """Each batch is a commit of Delta's own streaming sink, naming the query, the batch and
    the run; a batch replayed after a crash (its commit made, the checkpoint not told) is
    skipped by Delta, by the batch's app transaction."""
    bronze = Bronze(spark, settings, store)
    for i in range(3):
        bronze.land(f"{i}.json", json_lines([recording(i)]))
    run = bronze.run(AutoLoaderOptions(max_files_per_trigger=1))

    commits = store.history(bronze.table)
    assert [c.batch_id for c in reversed(commits)] == [0, 1, 2]
    assert {c.operation for c in commits} == {"STREAMING UPDATE"}
    assert {c.query for c in commits} == {run.query_id}
    assert {c.custom_metadata["lakehouse.runId"] for c in commits} == {run.run_id}
    assert {c.version for c in run.commits} == {0, 1, 2} and run.rows_written == 3
    engines = {json.loads(line)["commitInfo"]["engineInfo"]
               for log in sorted(Path(bronze.table, "_delta_log").glob("*.json"))
               for line in log.read_text().splitlines() if "commitInfo" in line}
    assert len(engines) == 1 and "Delta-Lake/" in engines.pop()

    # The crash: batch 2 committed to the table, not marked done in the checkpoint (whose
    # files have Hadoop checksums beside them, as a crash before the write would leave neither).
    for name in ("2", ".2.crc"):
        Path(bronze.checkpoint, "commits", name).unlink(missing_ok=True)
    # The table holds every landed file, so nothing is new and no query starts (the asset's
    # gate); the next landed file starts one, which replays batch 2 first.
    assert bronze.run(AutoLoaderOptions(max_files_per_trigger=1)).progress == []
    bronze.land("3.json", json_lines([recording(3)]))
    replay = bronze.run(AutoLoaderOptions(max_files_per_trigger=1))

    # Delta skips the replayed batch before reading it: nothing read, nothing committed; the
    # new file is the next batch's one commit.
    assert [p["batchId"] for p in replay.progress] == [2, 3]
    assert [c.batch_id for c in replay.commits] == [3] and replay.rows_written == 1
    assert store.committed_batch(bronze.table, str(run.query_id)) == 3
    assert sorted(r["mrn"] for r in bronze.rows()) == sorted(str(recording(i)["mrn"]) for i in range(4))
