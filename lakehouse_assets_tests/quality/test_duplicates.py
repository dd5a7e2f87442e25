"""Records landed twice: the first copy passes, every later one (in the same batch or a later
one) goes to the quarantine as a duplicate, decided the same way on a replay."""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.quality import silver
from lakehouse_assets.quality.bronze import RECORDINGS
from lakehouse_assets.quality.duplicates import DUPLICATE, DUPLICATES_KEY
from lakehouse_assets.quality.quarantine import QuarantineSink, route
from lakehouse_assets.storage import DeltaSink
from lakehouse_assets_tests.quality.data import BRONZE_SCHEMA, PATIENTS, T2020, bronze_row
from lakehouse_assets_tests.storage.helpers import as_query, drop_commit

UNIQUE_BY = ["device_id", "mrn", "time"]
PASSED_COLUMNS = ["device_id", "mrn", "name", "time", "heartrate", "_source_file"]
RECORDINGS_COLUMNS = tuple(RECORDINGS.columns)


def _batch(spark, rows) -> DataFrame:
    """Bronze rows joined with the patients and `time` parsed, as the silver asset routes them."""
    bronze = spark.createDataFrame(rows, BRONZE_SCHEMA)
    patients = spark.createDataFrame(sorted(PATIENTS.items()), "mrn BIGINT, name STRING")
    joined = bronze.alias("a").join(patients.alias("b"), F.col("a.mrn") == F.col("b.mrn"), "left").select(
        "a.*", F.col("b.name").alias("name"))
    parsed = joined.withColumn("time", F.col("time").cast("timestamp"))
    return route(parsed, silver.ROUTING_RULES)


def _rows(path: Path, columns: list[str]) -> list[tuple]:
    table = DeltaTable(str(path)).to_pyarrow_table(columns=columns).to_pylist()
    return sorted(tuple(r[c] for c in columns) for r in table)


def _drop_last_commit(table: Path) -> None:
    drop_commit(sorted((table / "_delta_log").glob("*.json"))[-1])


def test_later_copies_go_to_quarantine_as_duplicates_once_whatever_is_replayed(spark, store, settings) -> None:
    silver_path = Path(settings.table_path("silver", "recordings_enriched"))
    quarantine_path = Path(settings.table_path("silver", "recordings_quarantine"))
    sink = QuarantineSink(
        passed=DeltaSink(store, str(silver_path)),
        quarantine=DeltaSink(store, str(quarantine_path)),
        passed_columns=PASSED_COLUMNS, quarantine_columns=RECORDINGS_COLUMNS, unique_by=UNIQUE_BY,
    )
    first, second, third = (bronze_row(device_id=d, source=f"file:/landing/{d}.json") for d in (1, 2, 3))
    copy_of_first = bronze_row(device_id=1, source="file:/landing/copy-of-1.json")  # the same file landed again
    unknown = bronze_row(device_id=4, mrn=99999999, source="file:/landing/4.json")
    resent = bronze_row(device_id=1, source="file:/landing/5.json")  # re-sent in a later file
    later_reading = bronze_row(device_id=1, time=T2020 + 60, source="file:/landing/5.json")  # not a copy

    with as_query(spark):
        sink(_batch(spark, [copy_of_first, first, second, unknown, unknown]), 0)
        sink(_batch(spark, [resent, third, later_reading]), 1)
        sink(_batch(spark, [resent, third, later_reading]), 1)  # replayed after a crash past both commits
        # A crash between batch 1's quarantine commit and its silver commit: the replay decides the
        # same rows are copies, and commits silver's share only.
        _drop_last_commit(silver_path)
        sink(_batch(spark, [resent, third, later_reading]), 1)

    assert _rows(silver_path, ["device_id", "_source_file"]) == [
        (1, "file:/landing/1.json"), (1, "file:/landing/5.json"), (2, "file:/landing/2.json"),
        (3, "file:/landing/3.json")]
    assert [r for r in _rows(silver_path, ["device_id", "time"]) if r[0] == 1][1][1].timestamp() == T2020 + 60
    assert _rows(quarantine_path, ["device_id", "_source_file", "_quarantine_reason"]) == [
        (1, "file:/landing/5.json", DUPLICATE), (1, "file:/landing/copy-of-1.json", DUPLICATE),
        (4, "file:/landing/4.json", "known_patient"), (4, "file:/landing/4.json", "known_patient")]
    commits = [json.loads(json.loads(line)["commitInfo"]["userMetadata"])
               for path in sorted((silver_path / "_delta_log").glob("*.json"))
               for line in path.read_text().splitlines() if "commitInfo" in line]
    assert [c[DUPLICATES_KEY] for c in commits] == ["1", "1"]
