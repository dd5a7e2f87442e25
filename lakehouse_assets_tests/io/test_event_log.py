"""The event log through Dagster runs, real Spark and real tables: ``system.event_log`` is a
view over the tables' commits, computed when read. Its rows add up (bronze writes what landed;
silver writes plus quarantines what its rules checked), are what the UI's metadata reports, are
read by `lakehouse events` and by name in SQL, and a failed batch is in it as nothing: it
committed nothing."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import dagster as dg
import pytest
from pyspark.sql import DataFrame

from lakehouse_assets.assets.table_asset import stream_from, table_asset
from lakehouse_assets.cli import main
from lakehouse_assets.io import DeltaIOManager
from lakehouse_assets.location import locate
from lakehouse_assets.quality.rules import Severity, not_null
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import IO_MANAGER_KEY, STREAM_INPUT_KEY
from lakehouse_assets.tables.event_log import Event, events
from lakehouse_assets_tests.assets.pipeline import (
    SEED_WITHOUT_CHECKS,
    TO_SILVER,
    materialization_metadata,
    materialize,
)


def by_table(found: list[Event]) -> dict[str, list[Event]]:
    tables: dict[str, list[Event]] = defaultdict(list)
    for event in found:
        tables[event.table].append(event)
    return tables


@pytest.mark.slow
def test_the_event_log_adds_up_and_is_what_a_run_reports(spark, store, built, capsys):
    # The reference lakehouse's first run took the landed files, bad records among them.
    settings, landed, result = built.settings, built.recordings, built.seeds_run.result
    root = locate(settings.root)
    run = by_table(events(root, run_id=result.run_id))

    # Bronze wrote every landed line once; silver wrote or quarantined every row its rules checked.
    bronze, silver = run["bronze.recordings"], run["silver.recordings_enriched"]
    quarantine = run["silver.recordings_quarantine"]
    assert sum(e.rows_written or 0 for e in bronze) == landed.counts.total
    assert sum(e.rows_checked or 0 for e in silver) == sum(e.rows_written or 0 for e in bronze)
    assert sum(e.rows_written or 0 for e in quarantine) > 0
    assert (sum(e.rows_written or 0 for e in silver) + sum(e.rows_written or 0 for e in quarantine)
            == sum(e.rows_checked or 0 for e in silver))
    for event in silver:
        assert event.expectations_failed is not None, event
        assert event.batch_id is not None and event.query_id is not None, event
        assert event.started_at is not None and event.duration_ms is not None, event
    # Each row is its table's commit of that batch, as Delta's history has it.
    for table, table_events in run.items():
        history = {h.version: h for h in store.history(str(settings.table_path(*table.split("."))))}
        for event in table_events:
            commit = history[event.version]
            assert (commit.run_id, commit.query, commit.batch_id) == (event.run_id, event.query_id, event.batch_id)
    # What the run reports (and the UI plots) is the log's sum.
    metadata = materialization_metadata(result)
    for key, table in (("bronze/recordings", "bronze.recordings"),
                       ("silver/recordings_enriched", "silver.recordings_enriched")):
        assert metadata[key]["rows_written"] == sum(e.rows_written or 0 for e in run[table]), key
        assert metadata[key]["micro_batches"] == sum(1 for e in run[table] if e.batch_id is not None), key
    assert metadata["silver/recordings_enriched"]["rows_quarantined"] == sum(e.rows_written or 0 for e in quarantine)
    assert metadata["silver/recordings_enriched"]["rows_processed"] == sum(e.rows_checked or 0 for e in silver)

    # A run with nothing new commits nothing, so the log does not grow (the lookup, a batch
    # write, is not rewritten once the instance knows its last write completed); a run with
    # new files adds only its batches.
    before = events(root)
    again = materialize(SEED_WITHOUT_CHECKS, instance=built.changes_run.instance)
    assert events(root, run_id=again.run_id) == []
    assert events(root) == before
    more = built.land_recordings(files=1)
    second = materialize(SEED_WITHOUT_CHECKS)
    new_bronze = events(root, table="bronze.recordings", run_id=second.run_id)
    assert sum(e.rows_written or 0 for e in new_bronze) == more.counts.total

    # The command line and SQL read the same rows.
    assert main(["events", "--table", "silver.recordings_enriched", "--json", "--limit", "1000"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["matched"] == len(events(root, table="silver.recordings_enriched"))
    assert main(["events", "--run", second.run_id]) == 0
    assert "bronze.recordings" in capsys.readouterr().out
    tables = LakehouseResource.from_settings(settings).tables
    counted = tables.sql("SELECT count(*) AS n, sum(rows_written) AS written FROM system.event_log "
                         "WHERE table = 'bronze.recordings'").first()
    in_log = events(root, table="bronze.recordings")
    assert counted is not None and counted["n"] == len(in_log)
    assert counted["written"] == sum(e.rows_written or 0 for e in in_log)


@pytest.mark.slow
def test_lakehouse_events_shows_zero_for_a_count_of_nothing_and_a_dash_where_none_applies(built, capsys):
    built.land_recordings(files=1, bad_rate=0.0)
    result = materialize(TO_SILVER | dg.AssetSelection.assets(dg.AssetKey(["silver", "patients"])).without_checks())

    assert main(["events", "--run", result.run_id]) == 0

    printed = capsys.readouterr().out
    header, _, *lines = printed.splitlines()
    columns = re.split(r"\s{2,}", header)
    rows = {row["TABLE"]: row for row in (dict(zip(columns, re.split(r"\s{2,}", line.strip()), strict=True))
                                          for line in lines)}
    # Silver's rules checked every row and none failed.
    assert rows["silver.recordings_enriched"]["EXPECTATIONS FAILED"] == "0"
    # Bronze has no rules: nothing was checked; a batch write has no batch id.
    assert rows["bronze.recordings"]["EXPECTATIONS FAILED"] == "-"
    assert rows["bronze.recordings"]["CHECKED"] == "-"
    assert rows["silver.patients"]["BATCH"] == "-"
    assert "NULL" not in printed and "None" not in printed


SOURCE = ["bronze", "ev_source"]


@table_asset(layer="silver", name="ev_checked", ins={"rows": stream_from(SOURCE)},
             expectations=[not_null("id", name="id_present", severity=Severity.FAIL)])
def checked(rows: DataFrame) -> DataFrame:
    """Rows whose id must be there."""
    return rows.select("id")


def run_checked() -> dg.ExecuteInProcessResult:
    lakehouse = LakehouseResource.from_settings(LakehouseSettings.from_env())
    return dg.materialize(
        [checked, dg.AssetSpec(SOURCE).with_io_manager_key(IO_MANAGER_KEY)], selection=[checked.key],
        resources={"lakehouse": lakehouse, IO_MANAGER_KEY: DeltaIOManager(lakehouse=lakehouse),
                   STREAM_INPUT_KEY: DeltaIOManager(lakehouse=lakehouse, read_inputs_as="stream")},
        instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)


def test_a_failed_batch_commits_nothing_and_the_log_shows_only_committed_batches(spark, store, settings):
    source = str(settings.table_path(*SOURCE))
    store.write(spark.createDataFrame([(1,), (2,)], "id BIGINT"), source, mode="append")
    assert run_checked().success
    store.write(spark.createDataFrame([(3,), (None,)], "id BIGINT"), source, mode="append")

    failed = run_checked()

    assert not failed.success
    root = locate(settings.root)
    assert events(root, run_id=failed.run_id) == []
    # The error is the run's, in Dagster; every retry fails the same way and commits nothing.
    failure = next(e for e in failed.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert "id_present" in str(failure.event_specific_data)
    again = run_checked()
    assert not again.success and events(root, run_id=again.run_id) == []
    assert [e.batch_id for e in events(root, table="silver.ev_checked")] == [0]
