"""Tables by name in Spark's own catalog, on a real Spark session and real Delta tables: SQL
across layers gives the figures an independent Delta reader (delta-rs and pyarrow) computes;
time travel; streams; Delta's own SQL; unknown names; another lakehouse in the same session;
two processes at once; and the `lakehouse sql` / `lakehouse shell` commands in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.cli import main
from lakehouse_assets.errors import UnknownTableError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaSink, DeltaTableStore
from lakehouse_assets.streaming import run_stream
from lakehouse_assets.tables import LakehouseTables
from lakehouse_assets.tables.catalog import register_tables

READINGS = [(1, 101, 60.0), (1, 102, 70.0), (2, 101, 80.0), (3, 103, 90.0), (3, 103, 100.0)]
PATIENTS = [(101, "ada"), (102, "bob"), (103, "cy")]


@pytest.fixture
def tables(spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore) -> LakehouseTables:
    """bronze.readings in two versions (3 rows, then 5), silver.patients in one."""
    readings = str(settings.table_path("bronze", "readings"))
    store.write(spark.createDataFrame(READINGS[:3], "device_id BIGINT, mrn BIGINT, heartrate DOUBLE"), readings)
    store.write(spark.createDataFrame(READINGS[3:], "device_id BIGINT, mrn BIGINT, heartrate DOUBLE"), readings,
                mode="append")
    store.write(spark.createDataFrame(PATIENTS, "mrn BIGINT, name STRING"), str(settings.table_path("silver", "patients")))
    return LakehouseTables(spark, settings, store)


def independent_average_by_name(settings: LakehouseSettings) -> dict[str, float]:
    """What another Delta reader says: delta-rs reads both tables, Python joins and averages."""
    readings = DeltaTable(str(settings.table_path("bronze", "readings"))).to_pyarrow_table().to_pylist()
    names = {p["mrn"]: p["name"] for p in DeltaTable(str(settings.table_path("silver", "patients"))).to_pyarrow_table().to_pylist()}
    by_name: dict[str, list[float]] = defaultdict(list)
    for r in readings:
        by_name[names[r["mrn"]]].append(r["heartrate"])
    return {name: sum(values) / len(values) for name, values in by_name.items()}


def test_a_join_and_aggregate_across_layers_matches_an_independent_delta_reader(tables, settings) -> None:
    rows = tables.sql(
        "SELECT p.name, avg(heartrate) AS avg_hr FROM bronze.readings JOIN silver.patients p "
        "ON readings.mrn = p.mrn GROUP BY p.name"
    ).collect()
    assert {r["name"]: r["avg_hr"] for r in rows} == independent_average_by_name(settings)


def test_time_travel_by_version_in_sql_and_by_timestamp(tables, store, settings) -> None:
    assert tables.sql("SELECT count(*) AS n FROM bronze.readings VERSION AS OF 0").first()["n"] == 3
    assert tables.sql("SELECT count(*) AS n FROM bronze.readings").first()["n"] == 5
    first_commit = min(store.history(str(settings.table_path("bronze", "readings"))), key=lambda e: e.version)
    assert tables.version_at("bronze.readings", first_commit.timestamp) == 0
    assert tables.table("bronze.readings", timestamp="2999-01-01").count() == 5
    with pytest.raises(Exception, match="did not exist yet"):
        tables.table("bronze.readings", timestamp="2000-01-01")


def test_a_stream_by_name_reads_every_row_once(tables, spark, store, settings, tmp_path) -> None:
    target = str(settings.table_path("silver", "readings_copy"))
    checkpoint = str(tmp_path / "checkpoint")
    stream = tables.sql("SELECT mrn, heartrate FROM STREAM(bronze.readings) WHERE heartrate >= 70")
    assert stream.isStreaming
    run_stream(lambda: tables.sql("SELECT mrn, heartrate FROM STREAM(bronze.readings) WHERE heartrate >= 70"),
               DeltaSink(store, target), checkpoint_location=checkpoint)
    assert sorted(tuple(r) for r in tables.table("silver.readings_copy").collect()) == sorted(
        (m, h) for _, m, h in READINGS if h >= 70)


def test_an_unknown_table_is_named_with_the_tables_there_are(tables) -> None:
    with pytest.raises(UnknownTableError, match=r"No table bronze\.readngs .*bronze\.readings, silver\.patients"):
        tables.sql("SELECT * FROM bronze.readngs")
    # A name that exists, never one that does not (the README's query once joined bronze.patients).
    with pytest.raises(UnknownTableError, match=r"No table bronze\.patients .* Did you mean silver\.patients\?") as found:
        tables.sql("SELECT * FROM bronze.readings r JOIN bronze.patients p ON r.mrn = p.mrn")
    assert "materialize" not in str(found.value).lower()
    with pytest.raises(UnknownTableError, match="gold.nothing"):
        tables.table("gold.nothing")


def test_the_sql_command_prints_a_table_or_json(tables, settings, capsys) -> None:
    root = ["--root", str(settings.root)]
    assert main(["sql", "SELECT mrn, name FROM silver.patients ORDER BY mrn", *root]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["mrn", "name"] and "103  cy" in out and "(3 rows)" in out, out

    query = "SELECT device_id, count(*) AS n FROM bronze.readings GROUP BY device_id ORDER BY device_id"
    assert main(["sql", query.replace("readings", "readings VERSION AS OF 0", 1), "--format", "json", *root]) == 0
    assert json.loads(capsys.readouterr().out) == [{"device_id": 1, "n": 2}, {"device_id": 2, "n": 1}]


def test_the_sql_command_fails_naming_a_missing_table_or_the_query_error(tables, settings, capsys) -> None:
    assert main(["sql", "SELECT * FROM gold.nothing", "--root", str(settings.root)]) == 1
    assert "No table gold.nothing" in capsys.readouterr().err
    assert main(["sql", "SELECT no_such_column FROM silver.patients", "--root", str(settings.root)]) == 1
    err = capsys.readouterr().err
    assert "The query failed" in err and "no_such_column" in err and "\tat " not in err, err


def test_the_shell_runs_code_with_the_tables_by_name(tables, settings, capsys) -> None:
    code = 'print(sql("SELECT count(*) AS n FROM bronze.readings").first()["n"], tables.names())'
    assert main(["shell", "-c", code, "--root", str(settings.root)]) == 0
    assert capsys.readouterr().out.strip() == "5 ['bronze.readings', 'silver.patients']"


def test_spark_and_delta_know_the_tables_by_name(tables, spark, settings) -> None:
    assert spark.read.table("bronze.readings").count() == 5
    assert spark.read.option("versionAsOf", 0).table("bronze.readings").count() == 3
    assert spark.readStream.table("bronze.readings").isStreaming
    history = spark.sql("DESCRIBE HISTORY bronze.readings").orderBy("version").collect()
    assert [(h["version"], h["operation"]) for h in history] == [(0, "WRITE"), (1, "WRITE")]
    detail = spark.sql("DESCRIBE DETAIL silver.patients").first()
    assert detail["location"].rstrip("/").endswith(str(settings.table_path("silver", "patients")))
    assert sorted(row.tableName for row in spark.sql("SHOW TABLES IN bronze").collect()) == ["readings"]


def test_a_table_written_later_and_another_lakehouse_are_found(tables, spark, store, tmp_path) -> None:
    other = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path / "other")})
    store.write(spark.createDataFrame([(9, 1, 1.0)], "device_id BIGINT, mrn BIGINT, heartrate DOUBLE"),
                str(other.table_path("bronze", "readings")))

    # The same session now serves the other lakehouse: its bronze.readings, not the first's.
    assert LakehouseTables(spark, other, DeltaTableStore()).sql("SELECT device_id FROM bronze.readings").collect() == [(9,)]
    # And back: the first lakehouse's tables, with one written since.
    store.write(spark.createDataFrame([(1,)], "id long"), str(Path(tables.settings.table_path("gold", "ids"))))
    back = LakehouseTables(spark, tables.settings, DeltaTableStore())
    assert back.sql("SELECT count(*) AS n FROM bronze.readings").first()["n"] == 5
    assert back.sql("SELECT id FROM gold.ids").collect() == [(1,)]


def test_another_lakehouse_without_a_layer_does_not_see_the_first_ones_tables_in_it(tables, spark, store,
                                                                                  tmp_path) -> None:
    other = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path / "other")})
    store.write(spark.createDataFrame([(1,)], "id long"), str(other.table_path("gold", "ids")))

    with pytest.raises(UnknownTableError, match="bronze.readings"):
        LakehouseTables(spark, other, DeltaTableStore()).sql("SELECT * FROM bronze.readings")
    assert LakehouseTables(spark, other, DeltaTableStore()).sql("SELECT id FROM gold.ids").collect() == [(1,)]


def test_another_lakehouse_is_found_after_the_first_ones_table_was_damaged(tables, spark, store, tmp_path) -> None:
    # The first lakehouse's bronze.readings can no longer be read: its first commit is garbled.
    log = Path(tables.settings.table_path("bronze", "readings")) / "_delta_log"
    first = min(log.glob("*.json"))
    first.write_text(first.read_text() + "garbled\n")
    other = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path / "other")})
    store.write(spark.createDataFrame([(9, 1, 1.0)], "device_id BIGINT, mrn BIGINT, heartrate DOUBLE"),
                str(other.table_path("bronze", "readings")))

    # Still the other lakehouse's table by that name, not the damaged one left registered.
    assert LakehouseTables(spark, other, DeltaTableStore()).sql("SELECT device_id FROM bronze.readings").collect() == [(9,)]


def test_a_session_on_a_driver_that_holds_every_table_registers_nothing(tables, spark, store, settings) -> None:
    assert register_tables(spark, settings, DeltaTableStore()) == []

    store.write(spark.createDataFrame([(1,)], "id long"), str(settings.table_path("gold", "ids")))
    assert register_tables(spark, settings, DeltaTableStore()) == ["gold.ids"]
    assert register_tables(spark, settings, DeltaTableStore()) == []
    # Unregistered behind its back, the catalog is listed again once the tables on disk change.
    spark.sql("DROP TABLE gold.ids")
    store.write(spark.createDataFrame([(2,)], "id long"), str(settings.table_path("gold", "more_ids")))
    assert register_tables(spark, settings, DeltaTableStore()) == ["gold.ids", "gold.more_ids"]
    assert spark.read.table("gold.ids").count() == 1


def test_two_processes_query_the_tables_by_name_at_once(tables, spark, settings) -> None:
    """Embedded, each process registers the tables in its own driver's catalog: no shared
    metastore to lock (embedded Derby would allow one JVM). On an engine both attach to it.
    This process's driver holds its catalog while another process queries the same tables."""
    query = "SELECT count(*) AS n FROM bronze.readings JOIN silver.patients USING (mrn)"
    assert LakehouseTables(spark, settings, DeltaTableStore()).sql(query).first()["n"] == 5
    command = [sys.executable, "-m", "lakehouse_assets.cli", "sql", query, "--format", "json",
               "--root", str(settings.root)]
    env = {**os.environ, "LAKEHOUSE_ROOT": str(settings.root)}
    other = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    assert (other.returncode, json.loads(other.stdout or "null")) == (0, [{"n": 5}]), other.stderr[-3000:]
    assert LakehouseTables(spark, settings, DeltaTableStore()).sql(query).first()["n"] == 5


def test_a_folder_whose_first_write_never_committed_is_no_table_yet(tables, spark, settings) -> None:
    (settings.table_path("gold", "unborn") / "_delta_log").mkdir()

    assert LakehouseTables(spark, settings, DeltaTableStore()).sql("SELECT count(*) AS n FROM bronze.readings").first()["n"] == 5
    assert not spark.catalog.tableExists("gold.unborn")
