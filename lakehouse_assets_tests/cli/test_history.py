"""``lakehouse history TABLE``: commits newest first, with the streaming query and batch."""

from __future__ import annotations

import json
from pathlib import Path

from lakehouse_assets.storage.batch_record import BATCH_KEY, OPERATION_KEY, QUERY_KEY, user_metadata
from lakehouse_assets_tests.cli.helpers import Runner, write_table


def make_history(root: Path) -> None:
    write_table(root, "silver.recordings_enriched", {"mrn": [1, 2, 3]})
    # A commit as the project's streaming sink writes it: operation, query and batch in its
    # userMetadata (the rows, Delta's metrics say).
    write_table(root, "silver.recordings_enriched", {"mrn": [4, 5]}, custom_metadata={"userMetadata": user_metadata({
        OPERATION_KEY: "STREAMING UPDATE", QUERY_KEY: "silver__recordings_enriched", BATCH_KEY: 7})})
    write_table(root, "silver.recordings_enriched", {"mrn": [9]}, mode="overwrite")


def test_history_json_lists_versions_newest_first(lakehouse: Runner, root: Path) -> None:
    make_history(root)
    result = lakehouse("history", "silver.recordings_enriched", "--json")
    assert result.code == 0, str(result)
    report = json.loads(result.stdout)
    assert report["table"] == "silver.recordings_enriched"
    history = report["history"]
    assert [h["version"] for h in history] == [2, 1, 0]
    assert [h["operation"] for h in history] == ["WRITE", "STREAMING UPDATE", "WRITE"]
    assert [h["rows_written"] for h in history] == [1, 2, 3]
    assert (history[1]["query"], history[1]["batch_id"]) == ("silver__recordings_enriched", 7)
    assert history[0]["parameters"] == {"mode": "Overwrite"}
    assert all(h["timestamp"].endswith("+00:00") for h in history)


def test_history_limit_and_text(lakehouse: Runner, root: Path) -> None:
    make_history(root)
    result = lakehouse("history", "silver.recordings_enriched", "--limit", "2")
    assert result.code == 0, str(result)
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["VERSION", "TIMESTAMP", "OPERATION"]
    rows = [line for line in lines[2:] if line.lstrip()[:1].isdigit()]
    assert [row.split()[0] for row in rows] == ["2", "1"]
    assert "STREAMING UPDATE" in result.stdout and "silver__recordings_enriched" in result.stdout
    assert "2 newest of 3 versions" in result.stdout


def test_history_of_a_missing_table_names_it_and_what_exists(lakehouse: Runner, root: Path) -> None:
    write_table(root, "silver.recordings_enriched", {"mrn": [1]})
    result = lakehouse("history", "silver.recordings_enrich")
    assert result.code == 1, str(result)
    missing = root / "silver" / "recordings_enrich"
    assert f"No table silver.recordings_enrich: nothing at {missing}, and no asset declares it" in result.stderr
    assert "Did you mean silver.recordings_enriched?" in result.stderr
    assert "Traceback" not in result.stderr


def test_history_through_python_dash_m(lakehouse_process: Runner, root: Path) -> None:
    # The entry point itself: a real `python -m lakehouse_assets.cli` process.
    make_history(root)
    result = lakehouse_process("history", "silver.recordings_enriched", "--json", "--limit", "1", via="module")
    assert result.code == 0, str(result)
    assert [h["version"] for h in json.loads(result.stdout)["history"]] == [2]


def test_history_of_a_damaged_log(lakehouse: Runner, root: Path) -> None:
    path = write_table(root, "silver.damaged", {"mrn": [1]})
    (path / "_delta_log" / "00000000000000000000.json").write_text("not json\n")
    result = lakehouse("history", "silver.damaged")
    assert result.code == 1, str(result)
    assert f"Cannot read table silver.damaged at {path}" in result.stderr
    assert "Traceback" not in result.stderr
