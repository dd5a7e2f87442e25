"""``lakehouse status``: tables, landing files not yet ingested, and each streaming query's
progress, as its table's commits record it."""

from __future__ import annotations

import json
from pathlib import Path

from lakehouse_assets.simulator import land
from lakehouse_assets.storage.batch_record import BATCH_KEY, QUERY_KEY, user_metadata
from lakehouse_assets_tests.cli.helpers import Runner, write_checkpoint, write_table

QUERY_ID = "3f1c0d2e-query"


def batch_commit(query: str, batch: int) -> dict[str, str]:
    """The commit metadata of a streaming batch, as the project's sinks record it."""
    return {"userMetadata": user_metadata({QUERY_KEY: query, BATCH_KEY: batch})}


def landed_paths(root: Path, files: int) -> list[Path]:
    result = land(root / "landing", files=files, records_per_file=10, files_per_year=365)
    return list(result.paths)


def test_status_of_an_empty_root_says_what_to_do(lakehouse: Runner) -> None:
    result = lakehouse("status")
    assert result.code == 0, str(result)
    assert "(none yet" in result.stdout
    assert "lakehouse land" in result.stdout


def test_status_of_a_missing_root_fails_naming_it(lakehouse: Runner, root: Path) -> None:
    missing = root / "nope"
    result = lakehouse("status", "--root", str(missing))
    assert result.code == 1, str(result)
    assert f"No lakehouse at {missing}" in result.stderr
    assert "Traceback" not in result.stderr


def test_status_reports_tables_landing_and_queries(lakehouse: Runner, root: Path) -> None:
    paths = landed_paths(root, 3)
    # Spark records file URIs (with %-escapes); two of the three files are ingested.
    ingested = [f"file://{p}" for p in paths[:2]]
    write_table(root, "bronze.recordings", {"device_id": [1, 2, 3], "_source_file": [ingested[0], *ingested]})
    write_table(root, "bronze.recordings", {"device_id": [4], "_source_file": [ingested[1]]},
                custom_metadata=batch_commit(QUERY_ID, 4))
    write_table(root, "silver.patients", {"mrn": [1, 2], "name": ["a", "b"]})
    write_table(root, "gold.device_counts", {"device_id": [1], "total_recordings": [3]})
    (root / "silver" / "not_a_table").mkdir()  # no _delta_log: not listed
    (root / "_schemas" / "bronze" / "recordings").mkdir(parents=True)  # machinery, not a layer
    write_checkpoint(root, "bronze.recordings", committed=4, planned=5, offset='{"logOffset": 5}')
    write_checkpoint(root, "silver.recordings_enriched", committed=2, planned=2)

    result = lakehouse("status", "--json")
    assert result.code == 0, str(result)
    report = json.loads(result.stdout)
    assert report["root"] == str(root)
    tables = {t["table"]: t for t in report["tables"]}
    # Layers in data-flow order, tables by name.
    assert list(tables) == ["bronze.recordings", "silver.patients", "gold.device_counts"]
    assert (tables["bronze.recordings"]["version"], tables["bronze.recordings"]["rows"]) == (1, 4)
    assert (tables["silver.patients"]["version"], tables["silver.patients"]["rows"]) == (0, 2)
    assert tables["bronze.recordings"]["last_operation"] == "WRITE"
    assert tables["bronze.recordings"]["last_updated"].startswith("20")

    landing = {s["source"]: s for s in report["landing"]}
    assert landing["recordings"]["files"] == 3
    assert landing["recordings"]["not_ingested"] == 1
    assert landing["recordings"]["not_ingested_files"] == [paths[2].name]
    assert landing["recordings"]["ingested_by"] == ["bronze.recordings"]
    assert (landing["patients"]["files"], landing["patients"]["not_ingested"]) == (1, 1)

    # Each query with a checkpoint, at the last batch its table committed (none for a table
    # not written yet).
    queries = {q["table"]: q for q in report["queries"]}
    assert list(queries) == ["bronze.recordings", "silver.recordings_enriched"]
    bronze = queries["bronze.recordings"]
    assert (bronze["query_id"], bronze["batch"], bronze["version"]) == (QUERY_ID, 4, 1)
    assert bronze["committed_at"].startswith("20")
    assert (queries["silver.recordings_enriched"]["batch"], queries["silver.recordings_enriched"]["version"]) == \
        (None, None)

    text = lakehouse("status")
    assert text.code == 0, str(text)
    lines = text.stdout.splitlines()
    bronze_line = next(line for line in lines if line.startswith("bronze.recordings "))
    assert bronze_line.split()[:3] == ["bronze.recordings", "1", "4"]
    recordings_line = next(line for line in lines if line.startswith("recordings "))
    assert recordings_line.split() == ["recordings", "3", "1", "bronze.recordings"]
    assert "not_a_table" not in text.stdout and "_schemas" not in text.stdout


def test_landing_files_count_as_not_ingested_until_a_table_records_them(
        lakehouse: Runner, root: Path) -> None:
    landed_paths(root, 2)
    write_table(root, "bronze.recordings", {"device_id": [1]})  # no _source_file column
    result = lakehouse("status")
    assert result.code == 0, str(result)
    assert "no table has a _source_file column" in result.stdout
    report = json.loads(lakehouse("status", "--json").stdout)
    recordings = next(s for s in report["landing"] if s["source"] == "recordings")
    assert (recordings["files"], recordings["not_ingested"]) == (2, 2)


def test_an_unreadable_table_is_reported_and_the_rest_still_shown(lakehouse: Runner, root: Path) -> None:
    write_table(root, "silver.patients", {"mrn": [1]})
    log = root / "bronze" / "broken" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("this is not a delta log\n")
    result = lakehouse("status")
    assert result.code == 1, str(result)
    assert "silver.patients" in result.stdout
    assert f"cannot read {root / 'bronze' / 'broken'}" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_querys_progress_comes_from_its_tables_commits_not_its_checkpoint_files(
        lakehouse: Runner, root: Path) -> None:
    # The commit is the batch's record: a checkpoint's files (here damaged, and ahead of the
    # table) do not change what status says the query has done; a run meeting the damaged
    # file stops naming it (reliability/test_checkpoint_repair.py).
    write_table(root, "bronze.recordings", {"device_id": [1]}, custom_metadata=batch_commit(QUERY_ID, 0))
    write_table(root, "bronze.recordings", {"device_id": [2]}, custom_metadata=batch_commit(QUERY_ID, 1))
    write_table(root, "silver.recordings_enriched", {"mrn": [1]}, custom_metadata=batch_commit("other-query", 2))
    damaged = write_checkpoint(root, "bronze.recordings", committed=3, planned=4)
    write_checkpoint(root, "silver.recordings_enriched", committed=2, planned=2)
    (damaged / "offsets" / "4").write_text("v1\n{not json\n")

    result = lakehouse("status", "--json")

    assert result.code == 0, str(result)
    queries = {q["table"]: q for q in json.loads(result.stdout)["queries"]}
    assert (queries["bronze.recordings"]["query_id"], queries["bronze.recordings"]["batch"],
            queries["bronze.recordings"]["version"]) == (QUERY_ID, 1, 1)
    assert (queries["silver.recordings_enriched"]["query_id"], queries["silver.recordings_enriched"]["batch"]) == \
        ("other-query", 2)
    text = lakehouse("status")
    assert text.code == 0, str(text)
    line = next(x for x in text.stdout.splitlines() if x.startswith("bronze.recordings ") and QUERY_ID in x)
    assert line.split()[1:3] == ["1", "1"]
