"""A routed table declared in SQL, through real Spark, real tables and Dagster runs: its
quarantine keeps each row as it came from bronze (where it landed included), a quarantined
row is traced to its landed line, and after the SQL is fixed a quarantine replay runs the
query again on the rows as they came and moves those that pass now, exactly once, a crash
between the two commits included."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_assets.assets.bronze import bronze_table
from lakehouse_assets.assets.sql_asset import sql_asset
from lakehouse_assets.cli import main
from lakehouse_assets.ingestion import AutoLoaderOptions
from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.ingestion.files import local_file_path
from lakehouse_assets.io import DeltaIOManager
from lakehouse_assets.io import replay as replay_module
from lakehouse_assets.io.replay import replay_quarantine, routed_table_assets
from lakehouse_assets.quality.quarantine import QUARANTINE_REASON
from lakehouse_assets.reliability.provenance import trace_rows
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import IO_MANAGER_KEY, STREAM_INPUT_KEY
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.tables.lakehouse_tables import LakehouseTables

ADMISSIONS = bronze_table(
    name="admissions", data_source="admissions", source_format="csv",
    options=AutoLoaderOptions(format="csv", header=True,
                              schema_hints="admission_id BIGINT, ward STRING, admitted STRING, discharged STRING"))

LANDED = """admission_id,ward,admitted,discharged
1,A,2024-01-01 08:00:00,2024-01-01 20:00:00
2,,2024-01-02 08:00:00,2024-01-02 10:00:00
3,B,2024-01-03 08:00:00,2024-01-03 08:00:00
4,C,2024-01-04 09:00:00,2024-01-04 12:00:00
"""


def admissions_sql(*, discharged: str = ">", ward: str = "ward") -> str:
    """The table's SQL; the tests fix it as a user would: the rule (``discharged``), then
    the query (``ward``)."""
    return f"""
CREATE OR REFRESH STREAMING TABLE silver.admissions_clean (
  CONSTRAINT has_ward EXPECT (ward IS NOT NULL) ON VIOLATION DROP ROW,
  CONSTRAINT discharged_after_admitted EXPECT (discharged {discharged} admitted) ON VIOLATION DROP ROW
)
AS SELECT admission_id, {ward} AS ward, CAST(admitted AS TIMESTAMP) AS admitted,
  CAST(discharged AS TIMESTAMP) AS discharged,
  (unix_timestamp(CAST(discharged AS TIMESTAMP)) - unix_timestamp(CAST(admitted AS TIMESTAMP))) / 3600.0
    AS length_of_stay_hours
FROM STREAM bronze.admissions
"""


class Crash(Exception):
    """Stands in for a process killed at a fault point."""


def declared(tmp_path: Path, sql: str) -> dg.AssetsDefinition:
    path = tmp_path / "admissions_clean.sql"
    path.write_text(sql)
    return sql_asset(path)


def materialize(*assets: dg.AssetsDefinition) -> None:
    spark = LakehouseResource.from_settings(LakehouseSettings.from_env())
    dg.materialize(list(assets), resources={"lakehouse": spark, IO_MANAGER_KEY: DeltaIOManager(lakehouse=spark),
                                            STREAM_INPUT_KEY: DeltaIOManager(lakehouse=spark, read_inputs_as="stream")},
                   instance=dg.DagsterInstance.ephemeral())


def by_id(tables: LakehouseTables, table: str) -> dict[int, dict]:
    rows = [r.asDict() for r in tables.table(table).collect()]
    ids = [r["admission_id"] for r in rows]
    assert len(ids) == len(set(ids)), f"{table} holds a row twice: {sorted(ids)}"
    return {r["admission_id"]: r for r in rows}


def landed_line(source_file: str | None, source_line: int | None) -> str:
    assert source_file is not None and source_line is not None
    return Path(local_file_path(source_file)).read_text().splitlines()[source_line - 1]


def files_at(tables: LakehouseTables, table: str, version: int) -> set[str]:
    return {r[0] for r in tables.table(table, version=version).select(SOURCE_FILE_COLUMN).collect()}


def test_a_sql_quarantine_keeps_rows_as_they_came_and_is_traced_and_replayed_once(spark, store, settings, tmp_path,
                                                                                   monkeypatch, capsys):
    landing = Path(settings.landing_path("admissions"))
    landing.mkdir(parents=True)
    (landing / "admissions_1.csv").write_text(LANDED)
    strict = declared(tmp_path, admissions_sql())
    materialize(ADMISSIONS, strict)
    tables = LakehouseTables(spark, settings, DeltaTableStore())

    # The quarantine keeps each row as bronze holds it (admitted still the landed text), the
    # table the query's columns and where each row landed.
    bronze_columns = tables.table("bronze.admissions").columns
    assert {SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN, "_rescued_data", "_ingested_at"} <= set(bronze_columns)
    assert tables.table("silver.admissions_clean_quarantine").columns == [*bronze_columns, QUARANTINE_REASON]
    assert tables.table("silver.admissions_clean").columns == [
        "admission_id", "ward", "admitted", "discharged", "length_of_stay_hours", SOURCE_FILE_COLUMN,
        SOURCE_LINE_COLUMN]
    quarantined = by_id(tables, "silver.admissions_clean_quarantine")
    assert {i: r[QUARANTINE_REASON] for i, r in quarantined.items()} == {2: "has_ward",
                                                                         3: "discharged_after_admitted"}
    assert quarantined[3]["admitted"] == "2024-01-03 08:00:00"
    assert sorted(by_id(tables, "silver.admissions_clean")) == [1, 4]

    # A quarantined row is traced to the line it landed on, and to the versions that held it.
    [trace] = trace_rows(tables, "silver.admissions_clean_quarantine", "admission_id = 2")
    assert landed_line(trace.source_file, trace.source_line) == "2,,2024-01-02 08:00:00,2024-01-02 10:00:00"
    assert [c.table for c in trace.carried_by] == ["bronze.admissions", "silver.admissions_clean_quarantine"]
    for carrier in trace.carried_by:
        assert carrier.version is not None and trace.source_file in files_at(tables, carrier.table, carrier.version)
    assert main(["trace", "silver.admissions_clean_quarantine", "--where", "admission_id = 3", "--json"]) == 0
    [printed] = json.loads(capsys.readouterr().out)["rows"]
    assert landed_line(printed["source_file"], printed["source_line"]).startswith("3,B,")
    [kept] = trace_rows(tables, "silver.admissions_clean", "admission_id = 4")
    assert landed_line(kept.source_file, kept.source_line).startswith("4,C,")

    # The rule was too strict: fixed, the replay moves the row it held back, as the query makes it.
    fixed_rule = routed_table_assets([declared(tmp_path, admissions_sql(discharged=">="))])["silver.admissions_clean"]
    result = replay_quarantine(fixed_rule, spark, settings, store)
    assert (result.replay, result.moved, result.still_quarantined) == (0, 1, 1)
    moved = by_id(tables, "silver.admissions_clean")[3]
    assert (moved["length_of_stay_hours"], moved["admitted"].hour) == (0.0, 8)
    assert landed_line(moved[SOURCE_FILE_COLUMN], moved[SOURCE_LINE_COLUMN]).startswith("3,B,")
    assert sorted(by_id(tables, "silver.admissions_clean_quarantine")) == [2]

    # The query is fixed too (a missing ward is 'unassigned'); a crash between the table's
    # commit and the quarantine's is finished by the next replay, and nothing moves twice.
    fixed_query = routed_table_assets([declared(tmp_path, admissions_sql(
        discharged=">=", ward="coalesce(ward, 'unassigned')"))])["silver.admissions_clean"]

    def crash(point: str) -> None:
        if point == "replay.table_committed":
            raise Crash(point)

    with monkeypatch.context() as patched, pytest.raises(Crash):
        patched.setattr(replay_module, "fault_point", crash)
        replay_quarantine(fixed_query, spark, settings, store)
    assert sorted(by_id(tables, "silver.admissions_clean_quarantine")) == [2]  # its commit did not happen
    finished = replay_quarantine(fixed_query, spark, settings, store)
    assert (finished.finished_earlier, finished.replay, finished.moved) == (1, None, 0)
    assert by_id(tables, "silver.admissions_clean_quarantine") == {}
    table = by_id(tables, "silver.admissions_clean")
    assert sorted(table) == [1, 2, 3, 4] and table[2]["ward"] == "unassigned"
    again = replay_quarantine(fixed_query, spark, settings, store)
    assert (again.replay, again.moved, again.still_quarantined) == (None, 0, 0)

    # The stream goes on from where it was: a later file's rows are routed once.
    (landing / "admissions_2.csv").write_text("admission_id,ward,admitted,discharged\n"
                                              "5,D,2024-01-05 08:00:00,2024-01-05 09:00:00\n")
    materialize(ADMISSIONS, fixed_query)
    assert sorted(by_id(tables, "silver.admissions_clean")) == [1, 2, 3, 4, 5]
    assert by_id(tables, "silver.admissions_clean_quarantine") == {}
