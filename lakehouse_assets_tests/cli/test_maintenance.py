"""``lakehouse optimize`` and ``lakehouse vacuum``: the real command against tables on disk."""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable

from lakehouse_assets_tests.cli.helpers import Runner, delta_offset, write_checkpoint, write_table


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
    again = lakehouse("optimize", "bronze.events")
    assert again.code == 0 and "nothing to compact" in again.stdout, again


def test_optimize_z_orders_and_refuses_unknown_columns(root: Path, lakehouse: Runner) -> None:
    _three_commits(root, "bronze.events")

    assert lakehouse("optimize", "bronze.events", "--z-order", "k").code == 0
    wrong = lakehouse("optimize", "bronze.events", "--z-order", "nope")

    assert wrong.code == 1 and "no such column" in wrong.stderr and "bronze/events" in wrong.stderr, wrong


def test_a_table_or_all_must_be_given(root: Path, lakehouse: Runner) -> None:
    _three_commits(root, "bronze.events")

    assert lakehouse("optimize").code == 2
    assert lakehouse("vacuum", "bronze.events", "--all").code == 2
    missing = lakehouse("vacuum", "bronze.nope")
    assert missing.code == 1 and "bronze.events" in missing.stderr, missing


def test_vacuum_dry_run_lists_then_deletes_past_the_retention(root: Path, lakehouse: Runner) -> None:
    path = _three_commits(root, "bronze.events")
    before = _files(path)
    assert lakehouse("optimize", "bronze.events").code == 0

    kept = lakehouse("vacuum", "bronze.events", "--json")  # the default week keeps them
    dry = lakehouse("vacuum", "bronze.events", "--retain-hours", "0", "--dry-run")

    assert kept.code == 0 and json.loads(kept.stdout)["vacuumed"][0]["files"] == [], kept
    assert dry.code == 0, dry
    assert {line.split(": ")[1] for line in dry.stdout.splitlines() if line.startswith("bronze.events: ")} == before
    assert before <= _files(path)

    done = lakehouse("vacuum", "bronze.events", "--retain-hours", "0", "--json")

    assert done.code == 0, done
    assert set(json.loads(done.stdout)["vacuumed"][0]["files"]) == before
    assert not before & _files(path)
    assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3, 4]


def test_vacuum_refuses_what_a_stream_reader_still_needs_and_all_goes_on(root: Path, lakehouse: Runner) -> None:
    events = _three_commits(root, "bronze.events")
    _three_commits(root, "bronze.other")
    write_checkpoint(root, "silver.reader", committed=0, planned=0, offset=delta_offset(events, 0))
    assert lakehouse("optimize", "--all").code == 0

    refused = lakehouse("vacuum", "bronze.events", "--retain-hours", "0")

    assert refused.code == 1, refused
    assert "silver.reader" in refused.stderr and "--retain-hours 1" in refused.stderr, refused
    assert len(_files(events)) == 4  # nothing deleted

    every = lakehouse("vacuum", "--all", "--retain-hours", "0")

    assert every.code == 1 and "1 of 2 tables were not vacuumed" in every.stderr, every
    assert "bronze.other" in every.stdout and len(_files(root / "bronze" / "other")) == 1
    assert lakehouse("vacuum", "bronze.events", "--retain-hours", "1").code == 0
