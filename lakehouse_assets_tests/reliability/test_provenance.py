"""Row provenance through Dagster runs, real Spark and real tables: a silver row that feeds
gold, and a quarantined row, are traced to the landed line they came from (read back from the
file itself) and to the bronze and silver versions that first held them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakehouse_assets.cli import main
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.ingestion.files import local_file_path
from lakehouse_assets.reliability.provenance import RowTrace, trace_groups, trace_rows
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.tables.lakehouse_tables import LakehouseTables
from lakehouse_assets_tests.assets.pipeline import SEED_WITHOUT_CHECKS, materialize


def landed_line(trace: RowTrace) -> dict:
    assert trace.source_file is not None and trace.source_line is not None
    lines = Path(local_file_path(trace.source_file)).read_text().splitlines()
    return json.loads(lines[trace.source_line - 1])


def files_at(store, settings, table: str, version: int) -> set[str]:
    snapshot = store.snapshot(str(settings.table_path(*table.split("."))), version=version)
    return set(snapshot.to_arrow(["_source_file"]).column(0).to_pylist())


def assert_first_held_by(store, settings, trace: RowTrace) -> None:
    """Each carrier version holds the row's file, and the version before it does not."""
    for carrier in trace.carried_by:
        assert carrier.version is not None, trace
        assert trace.source_file in files_at(store, settings, carrier.table, carrier.version), carrier
        if carrier.version > 0:
            assert trace.source_file not in files_at(store, settings, carrier.table, carrier.version - 1), carrier


@pytest.mark.slow
def test_silver_and_quarantined_rows_are_traced_to_their_landed_line(spark, store, built, capsys):
    settings = built.settings
    later = built.land_recordings(files=1)
    materialize(SEED_WITHOUT_CHECKS)
    tables = LakehouseTables(spark, settings, DeltaTableStore())
    name = later.paths[0].name

    # A silver row of the later file that feeds a gold row.
    gold = {(r["mrn"], r["date"]) for r in tables.table("gold.daily_patient_avg").collect()}
    traces = trace_rows(tables, "silver.recordings_enriched", f"_source_file LIKE '%{name}'", limit=5)
    assert traces
    for trace in traces:
        row = trace.row
        assert (row["mrn"], row["time"].replace(hour=0, minute=0, second=0)) in gold
        record = landed_line(trace)
        assert (record["device_id"], record["mrn"], record["heartrate"]) == (row["device_id"], row["mrn"],
                                                                            row["heartrate"])
        assert [c.table for c in trace.carried_by] == ["bronze.recordings", "silver.recordings_enriched"]
        assert_first_held_by(store, settings, trace)
    assert {t.carried_by[0].version for t in traces} == {1}  # the second run's bronze version

    # A quarantined row: the line it came from, as it landed (a malformed one included).
    quarantined = trace_rows(tables, "silver.recordings_quarantine", "_source_line IS NOT NULL", limit=50)
    assert quarantined
    for trace in quarantined:
        text = Path(local_file_path(trace.source_file or "")).read_text().splitlines()[(trace.source_line or 0) - 1]
        rescued = json.loads(trace.row["_rescued_data"] or "{}")
        if "_raw" in rescued:  # a malformed line: kept as it landed
            assert rescued["_raw"] == text
        else:
            assert json.loads(text).get("mrn") == trace.row["mrn"] or "mrn" in rescued
        assert [c.table for c in trace.carried_by] == ["bronze.recordings", "silver.recordings_quarantine"]
        assert_first_held_by(store, settings, trace)

    # A gold row: the silver rows of its group, each to its landed line, and the gold version
    # that took it in.
    first = traces[0]
    day = first.row["time"].strftime("%Y-%m-%d")
    [group] = trace_groups(tables, "gold.daily_patient_avg",
                           f"mrn = {first.row['mrn']} AND date = TIMESTAMP '{day}'", limit=5)
    expected = {(r["_source_file"], r["_source_line"]) for r in tables.table("silver.recordings_enriched").collect()
                if r["mrn"] == first.row["mrn"] and r["time"].strftime("%Y-%m-%d") == day}
    assert {(t.source_file, t.source_line) for t in group.sources} == expected
    assert (first.source_file, first.source_line) in expected
    for source in group.sources:
        assert landed_line(source)["mrn"] == first.row["mrn"]
        assert [c.table for c in source.carried_by] == ["bronze.recordings", "silver.recordings_enriched",
                                                        "gold.daily_patient_avg"]
        assert all(c.version is not None for c in source.carried_by), source

    # The command line prints the same.
    assert main(["trace", "silver.recordings_enriched", "--where", f"_source_file LIKE '%{name}'",
                 "--limit", "5", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(r["source_file"], r["source_line"]) for r in printed["rows"]] == [(t.source_file, t.source_line)
                                                                              for t in traces]
    assert main(["trace", "gold.daily_patient_avg", "--where",
                 f"mrn = {first.row['mrn']} AND date = TIMESTAMP '{day}'", "--limit", "1"]) == 0
    assert (first.source_file or "") in capsys.readouterr().out
    with pytest.raises(LakehouseError, match="_source_file"):
        trace_rows(tables, "gold.daily_patient_avg", "mrn > 0")
