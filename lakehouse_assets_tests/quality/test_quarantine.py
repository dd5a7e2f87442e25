"""Routing the silver stream: every bronze row lands in exactly one of silver and quarantine,
with the reasons a plain-Python oracle expects, in batch and in a streaming query."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.quality import silver
from lakehouse_assets.quality.bronze import RECORDINGS
from lakehouse_assets.quality.evaluation import evaluate
from lakehouse_assets.quality.quarantine import QuarantineSink, quarantine_reason, route, split_routed
from lakehouse_assets.quality.rules import Severity
from lakehouse_assets.storage import DeltaSink
from lakehouse_assets.storage.sink import RunStamp
from lakehouse_assets.streaming import StreamRun, run_stream
from lakehouse_assets_tests.quality.data import (
    BRONZE_SCHEMA,
    PATIENTS,
    bronze_row,
    failed_silver_rules,
    mixed_bronze_rows,
)
from lakehouse_assets_tests.storage.helpers import as_query

RECORDINGS_COLUMNS = tuple(RECORDINGS.columns)


def silver_columns() -> list:
    """The silver projection, as the silver asset writes it (Columns need a session)."""
    return [
        "device_id", "mrn", "name",
        F.from_unixtime("time", "yyyy-MM-dd HH:mm:ss").cast("timestamp").alias("time"),
        "heartrate", "_source_file", "_source_line",
    ]


def numbered(rows):
    """Give each row a unique _source_file so it can be followed through the split."""
    return [row[:5] + (f"file:/landing/{i:04d}.json",) + row[6:] for i, row in enumerate(rows)]


def joined(bronze: DataFrame, patients: DataFrame) -> DataFrame:
    """The silver query's input: every bronze column and the patient's name (LEFT join)."""
    return bronze.alias("a").join(patients.alias("b"), F.col("a.mrn") == F.col("b.mrn"), "left").select(
        "a.*", F.col("b.name").alias("name")
    )


@pytest.fixture(scope="module")
def patients(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(sorted(PATIENTS.items()), "mrn BIGINT, name STRING")


def test_every_row_lands_once_with_the_reasons_the_rules_give(spark, patients):
    rows = numbered(mixed_bronze_rows(300, seed=6))
    bronze = spark.createDataFrame(rows, BRONZE_SCHEMA)

    passed, quarantined = split_routed(route(joined(bronze, patients), silver.ROUTING_RULES),
                                       passed_columns=silver_columns(),
                                       quarantine_columns=RECORDINGS_COLUMNS)

    expected = {row[5]: ",".join(failed_silver_rules(row)) or None for row in rows}
    got_quarantined = {r["_source_file"]: r["_quarantine_reason"] for r in quarantined.collect()}
    got_passed = [r["_source_file"] for r in passed.collect()]
    assert len(got_passed) + len(got_quarantined) == len(rows)
    assert set(got_passed).isdisjoint(got_quarantined)
    assert sorted(got_passed) == sorted(f for f, reason in expected.items() if reason is None)
    assert got_quarantined == {f: reason for f, reason in expected.items() if reason is not None}
    # The data set exercises every routing rule, and some WARN-only rows flow on to silver.
    reasons = {name for reason in got_quarantined.values() for name in reason.split(",")}
    assert reasons == {r.name for r in silver.ROUTING_RULES if r.severity is Severity.ERROR}
    assert any(r["device_id"] is None for r in passed.collect())


def test_routed_rows_satisfy_the_tables_contracts(spark, patients):
    bronze = spark.createDataFrame(numbered(mixed_bronze_rows(200, seed=8)), BRONZE_SCHEMA)

    passed, quarantined = split_routed(route(joined(bronze, patients), silver.ROUTING_RULES),
                                       passed_columns=silver_columns(), quarantine_columns=RECORDINGS_COLUMNS)

    # The stream's routing and the silver asset checks are the same rules: no ERROR check
    # can fail on what the stream let through.
    silver_result = evaluate(silver.RECORDINGS_ENRICHED, passed)
    assert not silver_result.structure_errors
    assert {n: r.failing_rows for n, r in silver_result.results.items() if r.severity is Severity.ERROR} == {
        r.name: 0 for r in silver.RECORDINGS_ENRICHED.rules if r.severity is Severity.ERROR
    }
    quarantine_result = evaluate(silver.RECORDINGS_QUARANTINE, quarantined)
    assert not quarantine_result.structure_errors and all(r.passed for r in quarantine_result.results.values())
    assert quarantined.columns == [*RECORDINGS_COLUMNS, "_quarantine_reason"]


def test_warn_rules_never_route(spark):
    df = spark.createDataFrame([bronze_row(device_id=None)], BRONZE_SCHEMA).withColumn("name", F.lit("Ann Lee"))

    assert df.select(quarantine_reason(silver.ROUTING_RULES)).first()[0] is None
    only_warn = [r for r in silver.ROUTING_RULES if r.severity is Severity.WARN]
    assert df.select(quarantine_reason(only_warn)).first()[0] is None


def test_routing_names_the_columns_it_misses(spark):
    df = spark.createDataFrame([bronze_row()], BRONZE_SCHEMA)  # no joined name

    with pytest.raises(LakehouseError, match=r"\['name'\]"):
        route(df, silver.ROUTING_RULES)


def _delta_rows(path: Path, columns: list[str]) -> list[dict]:
    """The independent reader: delta-rs alone."""
    return DeltaTable(str(path)).to_pyarrow_table(columns=columns).to_pylist()


def test_a_streaming_query_feeds_both_tables_and_loses_no_row(spark, store, settings, patients, tmp_path):
    landing = tmp_path / "bronze_files"
    checkpoint = str(settings.checkpoint_path("silver", "recordings_enriched"))
    silver_path = Path(settings.table_path("silver", "recordings_enriched"))
    quarantine_path = Path(settings.table_path("silver", "recordings_quarantine"))
    all_rows = numbered(mixed_bronze_rows(240, seed=4))

    def land(part: int, rows) -> None:
        spark.createDataFrame(rows, BRONZE_SCHEMA).coalesce(1).write.parquet(str(landing / f"part={part}"))

    def run_query() -> tuple[StreamRun, int]:
        stream = (spark.readStream.schema(BRONZE_SCHEMA).option("maxFilesPerTrigger", 1)
                  .option("recursiveFileLookup", "true").parquet(str(landing)))
        run_id = uuid.uuid4().hex
        sink = QuarantineSink(
            passed=DeltaSink(store, str(silver_path)),
            quarantine=DeltaSink(store, str(quarantine_path)),
            passed_columns=silver_columns(),
            quarantine_columns=RECORDINGS_COLUMNS,
        )
        run = run_stream(lambda: route(joined(stream, patients), silver.ROUTING_RULES), sink,
                         checkpoint_location=checkpoint, run_id=run_id)
        # What the run quarantined, read back from the quarantine table's log by run id.
        return run, sum(c.rows_written for c in sink.for_run(RunStamp(run_id)).quarantine.run_commits())

    land(0, all_rows[:100])
    land(1, all_rows[100:150])
    first, first_quarantined = run_query()
    land(2, all_rows[150:])
    second, second_quarantined = run_query()

    silver_files = [r["_source_file"] for r in _delta_rows(silver_path, ["_source_file"])]
    quarantined = {r["_source_file"]: r["_quarantine_reason"]
                   for r in _delta_rows(quarantine_path, ["_source_file", "_quarantine_reason"])}
    assert first.batches == 2 and second.batches == 1  # the second run read only the new file
    assert len(silver_files) + len(quarantined) == len(all_rows)  # bronze = silver + quarantine
    assert sorted(silver_files) == sorted(r[5] for r in all_rows if not failed_silver_rules(r))
    assert quarantined == {r[5]: ",".join(failed_silver_rules(r)) for r in all_rows if failed_silver_rules(r)}
    assert sum(c.rows_written for c in first.commits + second.commits) == len(silver_files)
    assert first_quarantined + second_quarantined == len(quarantined)


def test_a_replayed_batch_is_written_once_to_each_table(spark, store, settings, patients):
    silver_path = Path(settings.table_path("silver", "recordings_enriched"))
    quarantine_path = Path(settings.table_path("silver", "recordings_quarantine"))
    rows = numbered([bronze_row(), bronze_row(mrn=99999999), bronze_row(heartrate=0.0)])
    batch = route(joined(spark.createDataFrame(rows, BRONZE_SCHEMA), patients), silver.ROUTING_RULES)
    sink = QuarantineSink(
        passed=DeltaSink(store, str(silver_path)),
        quarantine=DeltaSink(store, str(quarantine_path)),
        passed_columns=silver_columns(), quarantine_columns=RECORDINGS_COLUMNS,
    )

    with as_query(spark) as query_id:
        sink(batch, 0)
        sink(batch, 0)  # Spark replays a batch after a crash between commit and checkpoint

    assert len(_delta_rows(silver_path, ["mrn"])) == 1
    assert len(_delta_rows(quarantine_path, ["mrn"])) == 2
    # Each table holds the batch once, as its app transaction of the query.
    assert [store.committed_batch(str(path), query_id) for path in (silver_path, quarantine_path)] == [0, 0]
    assert [DeltaTable(str(path)).version() for path in (silver_path, quarantine_path)] == [0, 0]
