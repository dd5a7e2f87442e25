"""The event log through Dagster runs, real Spark and real tables: one row per micro-batch per
table that adds up (bronze reads what landed; silver writes plus quarantines what it reads),
agrees with the tables' own commits, is what the UI's metadata reports, is read by
`lakehouse events` and by name in SQL, and logs a failed batch with its error."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import dagster as dg
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame

from lakehouse_assets.assets.table_asset import stream_from, table_asset
from lakehouse_assets.cli import main
from lakehouse_assets.io import DeltaIOManager
from lakehouse_assets.location import locate
from lakehouse_assets.quality.rules import Severity, not_null
from lakehouse_assets.reliability.events_once import check_events_once
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import IO_MANAGER_KEY, STREAM_INPUT_KEY
from lakehouse_assets.storage import AppTransaction, event_log
from lakehouse_assets.storage.event_log import BatchEvent, event_log_path, read_events
from lakehouse_assets.tables.lakehouse_tables import LakehouseTables
from lakehouse_assets_tests.assets.pipeline import (
    SEED_WITHOUT_CHECKS,
    TO_SILVER,
    materialization_metadata,
    materialize,
)


def by_table(events: list[BatchEvent]) -> dict[str, list[BatchEvent]]:
    found: dict[str, list[BatchEvent]] = defaultdict(list)
    for event in events:
        found[event.table].append(event)
    return found


@pytest.mark.slow
def test_the_event_log_adds_up_and_is_what_a_run_reports(spark, store, built, capsys):
    # The reference lakehouse's first run took the landed files, bad records among them.
    settings, landed, result = built.settings, built.recordings, built.seeds_run.result
    log = event_log_path(settings.root)
    events = by_table(read_events(log, run_id=result.run_id))

    # Bronze read every landed line once; silver wrote or quarantined every row it read.
    bronze, silver = events["bronze.recordings"], events["silver.recordings_enriched"]
    assert sum(e.input_rows or 0 for e in bronze) == landed.counts.total
    assert sum(e.input_rows or 0 for e in silver) == sum(e.output_rows or 0 for e in bronze)
    assert sum(e.quarantined_rows or 0 for e in silver) > 0
    for event in silver:
        assert event.output_rows is not None and event.quarantined_rows is not None
        assert event.output_rows + event.quarantined_rows == event.input_rows, event
        assert event.expectations, event
        for rule in event.expectations:
            assert rule.passed + rule.failed == event.input_rows, (event, rule)
        assert event.status == "committed" and event.started_at is not None and event.duration_ms is not None
    # Each event is its table's commit of that batch.
    for table, table_events in events.items():
        if not table.startswith(("bronze.", "silver.", "gold.")):
            continue
        history = {(h.query, h.batch_id): h.version for h in store.history(str(settings.table_path(*table.split("."))))}
        for event in table_events:
            if event.batch_id is not None:
                assert history[(event.query_id, event.batch_id)] == event.table_version, event
    # What the run reports (and the UI plots) is the log's sum.
    metadata = materialization_metadata(result)
    for key, table in (("bronze/recordings", "bronze.recordings"), ("silver/recordings_enriched",
                                                                     "silver.recordings_enriched"),
                       ("gold/daily_patient_avg", "gold.daily_patient_avg")):
        assert metadata[key]["rows_processed"] == sum(e.input_rows or 0 for e in events[table]), key
        assert metadata[key]["micro_batches"] == len(events[table]), key
    assert metadata["silver/recordings_enriched"]["rows_quarantined"] == sum(e.quarantined_rows or 0 for e in silver)
    assert check_events_once(settings).ok, check_events_once(settings).violations

    # A run with nothing new logs no batch (the patients lookup is a batch write: rewritten
    # by every run, logged by table version); a run with new files logs only its batches.
    before = [e for e in read_events(log) if e.batch_id is not None]
    again = materialize(SEED_WITHOUT_CHECKS)
    assert [e for e in read_events(log) if e.batch_id is not None] == before
    assert {e.table for e in read_events(log, run_id=again.run_id)} <= {"silver.patients"}
    more = built.land_recordings(files=1)
    second = materialize(SEED_WITHOUT_CHECKS)
    new_bronze = read_events(log, table="bronze.recordings", run_id=second.run_id)
    assert sum(e.input_rows or 0 for e in new_bronze) == more.counts.total
    assert check_events_once(settings).ok, check_events_once(settings).violations

    # The command line and SQL read the same rows.
    assert main(["events", "--table", "silver.recordings_enriched", "--json", "--limit", "1000"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["matched"] == len(read_events(log, table="silver.recordings_enriched"))
    assert main(["events", "--run", second.run_id]) == 0
    assert "bronze.recordings" in capsys.readouterr().out
    counted = LakehouseTables(spark, settings).sql(
        "SELECT count(*) AS n FROM system.event_log WHERE table = 'bronze.recordings'").first()
    assert counted is not None and counted["n"] == len(read_events(log, table="bronze.recordings"))


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
    # Silver's rules counted every row and none failed; nothing went to its quarantine.
    assert rows["silver.recordings_enriched"]["EXPECTATIONS FAILED"] == "0"
    assert rows["silver.recordings_enriched"]["QUARANTINED"] == "0"
    # Bronze has neither rules nor a quarantine; a batch write has no batch id.
    assert rows["bronze.recordings"]["EXPECTATIONS FAILED"] == "-"
    assert rows["bronze.recordings"]["QUARANTINED"] == "-"
    assert rows["silver.patients"]["BATCH"] == "-"
    assert "NULL" not in printed


SOURCE = ["bronze", "ev_source"]


@table_asset(layer="silver", name="ev_checked", ins={"rows": stream_from(SOURCE)},
             expectations=[not_null("id", name="id_present", severity=Severity.FAIL)])
def checked(rows: DataFrame) -> DataFrame:
    """Rows whose id must be there."""
    return rows.select("id")


def run_checked() -> dg.ExecuteInProcessResult:
    spark = LakehouseResource.from_settings(LakehouseSettings.from_env())
    return dg.materialize(
        [checked, dg.AssetSpec(SOURCE).with_io_manager_key(IO_MANAGER_KEY)], selection=[checked.key],
        resources={"lakehouse": spark, IO_MANAGER_KEY: DeltaIOManager(lakehouse=spark),
                   STREAM_INPUT_KEY: DeltaIOManager(lakehouse=spark, read_inputs_as="stream")},
        instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)


def test_a_failed_batch_is_logged_with_its_error_once_per_attempt(spark, store, settings):
    source = str(settings.table_path(*SOURCE))
    store.write(spark.createDataFrame([(1,), (2,)], "id BIGINT"), source, mode="append")
    assert run_checked().success
    store.write(spark.createDataFrame([(3,), (None,)], "id BIGINT"), source, mode="append")

    failed = run_checked()

    assert not failed.success
    log = event_log_path(settings.root)
    [failure] = read_events(log, run_id=failed.run_id)
    assert failure.status == "failed" and failure.table == "silver.ev_checked"
    assert failure.batch_id == 1 and failure.table_version is None
    assert failure.error is not None and "id_present" in failure.error
    # Each attempt is an event of its own; the batch is never logged as committed.
    again = run_checked()
    assert [e.status for e in read_events(log, run_id=again.run_id)] == ["failed"]
    committed = [e for e in read_events(log, table="silver.ev_checked") if e.status == "committed"]
    assert [e.batch_id for e in committed] == [0]
    assert check_events_once(settings).ok, check_events_once(settings).violations


def test_the_log_compacts_its_small_files_every_so_many_appends(tmp_path, monkeypatch):
    monkeypatch.setattr(event_log, "COMPACT_EVERY", 10)
    path = locate(tmp_path / "event_log")
    for batch in range(35):  # one append per materialization, as runs make them
        event = BatchEvent(run_id=f"run-{batch}", table="bronze.recordings", query_id="q", batch_id=batch,
                           table_version=batch, input_rows=1, output_rows=1)
        assert event_log.append_events(path, [event], logs=AppTransaction("bronze.recordings#q", batch))

    log = DeltaTable(str(path))
    assert log.version() > 35, "compactions are commits of their own"
    # Compacted at the 10th, 20th and 30th append: what came after the last one is still apart.
    assert len(log.file_uris()) < 10
    assert [e.batch_id for e in read_events(path)] == list(range(35))
    assert [e.batch_id for e in read_events(path, run_id="run-7")] == [7]
    compactions = [c for c in log.history() if c.get("operation") == "OPTIMIZE"]
    assert len(compactions) == 3 and all(c.get("operationParameters") for c in compactions)
