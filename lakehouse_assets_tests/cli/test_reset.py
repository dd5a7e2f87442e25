"""``lakehouse reset TABLE``: deletes exactly the table, its checkpoint and its stored schema,
and only when told to."""

from __future__ import annotations

import os
import pty
from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import DataFrame

from lakehouse_assets.assets.discovery import streaming_downstream
from lakehouse_assets.assets.table_asset import batch_from, stream_from, table_asset
from lakehouse_assets_tests.cli.helpers import Runner, write_checkpoint, write_table

TABLE = "silver.recordings_enriched"


def make_lakehouse(root: Path) -> dict[str, Path]:
    """The table to reset with all its parts, and a neighbour of each that must survive."""
    paths = {
        "table": write_table(root, TABLE, {"mrn": [1, 2]}),
        "checkpoint": write_checkpoint(root, TABLE, committed=1, planned=1),
        "schema": root / "_schemas" / "silver" / "recordings_enriched",
        "other table": write_table(root, "silver.patients", {"mrn": [1]}),
        "other checkpoint": write_checkpoint(root, "gold.daily_patient_avg", committed=0, planned=0),
        "other schema": root / "_schemas" / "bronze" / "recordings",
    }
    for key in ("schema", "other schema"):
        paths[key].mkdir(parents=True)
        (paths[key] / "schema.json").write_text("{}")
    return paths


def test_reset_yes_deletes_the_table_checkpoint_and_schema_only(lakehouse: Runner, root: Path) -> None:
    paths = make_lakehouse(root)
    result = lakehouse("reset", TABLE, "--yes")
    assert result.code == 0, str(result)
    assert not paths["table"].exists()
    assert not paths["checkpoint"].exists()
    assert not paths["schema"].exists()
    assert paths["other table"].joinpath("_delta_log").is_dir()
    assert paths["other checkpoint"].is_dir() and paths["other schema"].is_dir()
    for key in ("table", "checkpoint", "schema"):
        assert str(paths[key]) in result.stdout
    assert f"Reset {TABLE}: the next materialization rebuilds it" in result.stdout
    # The table is gone for the other commands too.
    assert lakehouse("show", TABLE).code == 1


def test_reset_without_yes_and_without_a_terminal_refuses(lakehouse: Runner, root: Path) -> None:
    paths = make_lakehouse(root)
    result = lakehouse("reset", TABLE, stdin_text="y\n")  # piped input is not a confirmation
    assert result.code == 2, str(result)
    assert f"lakehouse reset {TABLE} --yes" in result.stderr
    assert paths["table"].is_dir() and paths["checkpoint"].is_dir() and paths["schema"].is_dir()


@pytest.mark.parametrize(("answer", "code"), [(b"y\n", 0), (b"yes\n", 0), (b"n\n", 1), (b"\n", 1)])
def test_reset_asks_on_a_terminal(lakehouse: Runner, root: Path, answer: bytes, code: int) -> None:
    paths = make_lakehouse(root)
    leader, follower = pty.openpty()
    os.write(leader, answer)  # the terminal keeps the line until the prompt reads it
    try:
        # stdin is a real (pseudo-)terminal, as in an interactive shell; stdout and stderr are not.
        with open(follower, encoding="utf-8") as terminal:
            assert terminal.isatty()
            result = lakehouse("reset", TABLE, stdin=terminal)
    finally:
        os.close(leader)
    assert result.code == code, str(result)
    assert f"Reset {TABLE}? [y/N]" in result.stderr
    assert paths["table"].exists() is (code != 0)
    assert paths["checkpoint"].exists() is (code != 0)
    if code:
        assert "Not reset: nothing was deleted." in result.stderr


def test_reset_of_nothing_fails_naming_the_paths(lakehouse: Runner, root: Path) -> None:
    write_table(root, "silver.patients", {"mrn": [1]})
    result = lakehouse("reset", "silver.nothing", "--yes")
    assert result.code == 1, str(result)
    assert f"no table at {root / 'silver' / 'nothing'}" in result.stderr
    assert "Tables under" in result.stderr and "silver.patients" in result.stderr


def test_reset_clears_a_checkpoint_left_without_its_table(lakehouse: Runner, root: Path) -> None:
    checkpoint = write_checkpoint(root, TABLE, committed=3, planned=4)
    result = lakehouse("reset", TABLE, "--yes")
    assert result.code == 0, str(result)
    assert not checkpoint.exists()


# -- which tables stream from the reset one (from a hand-built asset graph) ----------------------
def _graph() -> list[dg.AssetsDefinition]:
    @table_asset(layer="bronze")
    def recordings() -> DataFrame: ...

    @table_asset(layer="silver")
    def patients() -> DataFrame: ...

    @table_asset(layer="silver", ins={"r": stream_from(["bronze", "recordings"]),
                                       "p": batch_from(["silver", "patients"])})
    def enriched(r: DataFrame, p: DataFrame) -> DataFrame: ...

    @table_asset(layer="gold", ins={"r": stream_from(["silver", "enriched"])})
    def daily(r: DataFrame) -> DataFrame: ...

    @table_asset(layer="gold", ins={"r": stream_from(["bronze", "recordings"])})
    def counts(r: DataFrame) -> DataFrame: ...

    @table_asset(layer="gold", ins={"p": batch_from(["silver", "patients"])})
    def names(p: DataFrame) -> DataFrame: ...

    return [recordings, patients, enriched, daily, counts, names]


@pytest.mark.parametrize(("key", "downstream"), [
    (["bronze", "recordings"], ["gold.counts", "silver.enriched", "gold.daily"]),
    (["silver", "enriched"], ["gold.daily"]),
    (["silver", "patients"], []),  # read in batch: nothing to reset downstream
    (["gold", "daily"], []),
    (["gold", "unknown"], None),
])
def test_streaming_downstream(key: list[str], downstream: list[str] | None) -> None:
    assert streaming_downstream(_graph(), ".".join(key)) == downstream


def test_streaming_downstream_follows_sql_streams_and_quarantines() -> None:
    from lakehouse_assets.definitions import defs

    downstream = streaming_downstream(defs.assets or [], "bronze.recordings")

    assert downstream is not None
    # gold.device_counts reads STREAM(bronze.recordings) in SQL; the quarantine is written by
    # silver's query; gold.daily_patient_avg reads STREAM(silver.recordings_enriched) in SQL.
    assert {"gold.device_counts", "silver.recordings_enriched", "silver.recordings_quarantine",
            "gold.daily_patient_avg", "gold.heartrate_5min"} <= set(downstream)
    assert "silver.patients" not in downstream
