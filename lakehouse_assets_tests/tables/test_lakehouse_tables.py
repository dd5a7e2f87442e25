"""Tables by name on a real Spark session and real Delta tables: SQL across layers gives the
figures an independent Delta reader (delta-rs and pyarrow) computes; time travel; streams;
unknown names; and the `lakehouse sql` / `lakehouse shell` commands in this process."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.cli import main
from lakehouse_assets.errors import UnknownTableError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaSink, DeltaTableStore
from lakehouse_assets.streaming import run_stream
from lakehouse_assets.tables import LakehouseTables

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


def test_time_travel_by_version_in_sql_by_argument_and_by_timestamp(tables, store, settings) -> None:
    assert tables.sql("SELECT count(*) AS n FROM bronze.readings VERSION AS OF 0").first()["n"] == 3
    assert tables.sql("SELECT count(*) AS n FROM bronze.readings").first()["n"] == 5
    assert tables.sql("SELECT count(*) AS n FROM bronze.readings", versions={"bronze.readings": 0}).first()["n"] == 3
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
               DeltaSink(store, target, checkpoint), checkpoint_location=checkpoint)
    assert sorted(tuple(r) for r in tables.table("silver.readings_copy").collect()) == sorted(
        (m, h) for _, m, h in READINGS if h >= 70)


def test_an_unknown_table_is_named_with_the_tables_there_are(tables) -> None:
    with pytest.raises(UnknownTableError, match=r"No table bronze\.readngs .*bronze\.readings, silver\.patients"):
        tables.sql("SELECT * FROM bronze.readngs")
    with pytest.raises(UnknownTableError, match="gold.nothing"):
        tables.table("gold.nothing")


def test_the_sql_command_prints_a_table_or_json(tables, settings, capsys) -> None:
    root = ["--root", str(settings.root)]
    assert main(["sql", "SELECT mrn, name FROM silver.patients ORDER BY mrn", *root]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["mrn", "name"] and "103  cy" in out and "(3 rows)" in out, out

    query = "SELECT device_id, count(*) AS n FROM bronze.readings GROUP BY device_id ORDER BY device_id"
    assert main(["sql", query, "--format", "json", "--version", "bronze.readings=0", *root]) == 0
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
