"""``lakehouse optimize`` and ``lakehouse vacuum``: the command against tables on disk.

Delta Lake does the work in a Spark session: in this process, the test session's (hence the
``spark`` fixture); what compaction and VACUUM do is tested in ``storage/test_maintenance.py``."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from lakehouse_assets.location import locate
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage.batch_record import READING_KEY, RUN_KEY, Reading, TableVersion, user_metadata
from lakehouse_assets_tests.cli.helpers import Runner, write_table
from lakehouse_assets_tests.conftest import TEST_JVM_OPTIONS

pytestmark = pytest.mark.usefixtures("spark")


def _three_commits(root: Path, table: str) -> Path:
    path = Path()
    for ids in ([1, 2], [3], [4]):
        path = write_table(root, table, {"id": ids, "k": [-i for i in ids]})
    return path


def _files(path: Path) -> set[str]:
    return {p.name for p in path.glob("*.parquet")}


def test_optimize_compacts_a_table_and_says_what_it_did(root: Path, lakehouse: Runner) -> None:
    path = _three_commits(root, "bronze.events")

    result = lakehouse("optimize", "bronze.events", "--json")

    assert result.code == 0, result
    [row] = json.loads(result.stdout)["optimized"]
    assert (row["table"], row["version"], row["files_removed"], row["files_added"]) == ("bronze.events", 3, 3, 1)
    assert DeltaTable(str(path)).history(1)[0]["operation"] == "OPTIMIZE"
    wrong = lakehouse("optimize", "bronze.events", "--z-order", "nope")

    assert wrong.code == 1 and "no such column" in wrong.stderr and "bronze/events" in wrong.stderr, wrong


def test_a_table_or_all_must_be_given(root: Path, lakehouse: Runner) -> None:
    _three_commits(root, "bronze.events")

    assert lakehouse("optimize").code == 2
    assert lakehouse("vacuum", "bronze.events", "--all").code == 2
    missing = lakehouse("vacuum", "bronze.nope")
    assert missing.code == 1 and "bronze.events" in missing.stderr, missing


def test_vacuum_lists_deletes_and_refuses_what_a_stream_reader_still_needs(
        root: Path, lakehouse: Runner, lakehouse_process: Runner) -> None:
    events = _three_commits(root, "bronze.events")
    other = _three_commits(root, "bronze.other")
    compacted_away = _files(other)
    # silver.reader's query has read bronze.events to version 0, as its table's newest commit
    # records, made by a run that the Dagster instance at DAGSTER_HOME records as completed
    # (it materialized silver.reader).
    LakehouseSettings(locate(root)).checkpoint_path("silver", "reader").mkdir()
    home = root.parent / "dagster_home"
    home.mkdir()

    @dg.asset(key=["silver", "reader"])
    def reader() -> None:
        return None

    with dg.DagsterInstance.from_config(str(home)) as instance:
        run_id = dg.materialize([reader], instance=instance).run_id
    read = Reading({"bronze.events": TableVersion(str(DeltaTable(str(events)).metadata().id), 0)})
    write_table(root, "silver.reader", {"id": [1]}, custom_metadata={
        "userMetadata": user_metadata({RUN_KEY: run_id, READING_KEY: read.to_json()})})
    dagster_home = {"DAGSTER_HOME": str(home)}
    assert lakehouse("optimize", "--all").code == 0

    # Without the instance, where silver.reader has read to is unknown: nothing is deleted.
    blind = lakehouse("vacuum", "bronze.other", "--retain-hours", "0", extra_env={"DAGSTER_HOME": ""})
    assert blind.code == 1 and "no materialization of silver.reader records" in blind.stderr, blind

    dry = lakehouse("vacuum", "--all", "--retain-hours", "0", "--dry-run", extra_env=dagster_home)

    assert dry.code == 1, dry  # bronze.events is refused, even listing
    assert {line.split(": ")[1] for line in dry.stdout.splitlines() if line.startswith("bronze.other: ")} == \
        compacted_away
    assert compacted_away <= _files(other)

    # The real command, in a process and a JVM of its own: Delta's VACUUM prints what it
    # deleted to the driver's console (Scala's println), which an embedded driver shares with
    # the command's stdout, and the JSON there must stay whole. Only a fresh JVM shows that: the
    # test session's is a child process with console streams of its own, which nothing run in
    # this process captures. (A short-lived JVM's options: it starts in about half the time.)
    every = lakehouse_process("vacuum", "--all", "--retain-hours", "0", "--json", extra_env={
        **dagster_home, "LAKEHOUSE_SPARK_CONF": json.dumps({"spark.driver.extraJavaOptions": TEST_JVM_OPTIONS})})

    assert every.code == 1 and "1 of 3 tables were not vacuumed" in every.stderr, every
    assert "silver.reader" in every.stderr and "--retain-hours 1" in every.stderr, every
    vacuumed = {v["table"]: v for v in json.loads(every.stdout)["vacuumed"]}
    assert set(vacuumed) == {"bronze.other", "silver.reader"}, vacuumed
    assert set(vacuumed["bronze.other"]["files"]) == compacted_away and not vacuumed["silver.reader"]["files"]
    assert not compacted_away & _files(other) and len(_files(events)) == 4  # bronze.events: nothing deleted
    assert sorted(DeltaTable(str(other)).to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3, 4]
