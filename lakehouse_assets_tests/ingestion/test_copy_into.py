"""COPY INTO: idempotent batch loads that remember their files in the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.cli import main
from lakehouse_assets.errors import SchemaMismatchError
from lakehouse_assets.ingestion import COPY_INTO_APP_ID, copied_files, copy_into
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore

from .helpers import file_uri, land

CSV_OPTIONS = {"header": "true", "inferSchema": "true"}


def test_run_twice_loads_once_and_force_loads_again(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    source, table = tmp_path / "src", str(tmp_path / "patients")
    files = [land(source, f"p{i}.csv", f"mrn,name\n{i},n{i}\n{i + 10},m{i}\n") for i in range(3)]
    land(source, "p9.csv.tmp", "mrn,name\n99,half-written\n")

    first = copy_into(spark, table_path=table, source=source, format="csv", format_options=CSV_OPTIONS, store=store)
    second = copy_into(spark, table_path=table, source=source, format="csv", format_options=CSV_OPTIONS, store=store)
    forced = copy_into(spark, table_path=table, source=source, format="csv", format_options=CSV_OPTIONS, store=store,
                       force=True)

    uris = sorted(file_uri(f) for f in files)
    assert (sorted(first.loaded), first.skipped, first.rows_written) == (uris, (), 6)
    assert (second.loaded, sorted(second.skipped), second.rows_written, second.version) == ((), uris, 0, None)
    assert (sorted(forced.loaded), forced.rows_written, forced.load_id) == (uris, 6, 1)
    assert store.read(spark, table).count() == 12
    state = copied_files(table, store=store)
    assert [(f.batch_id, f.table_version) for f in state] == [(0, first.version)] * 3 + [(1, forced.version)] * 3


def test_new_files_and_patterns(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    source, table = tmp_path / "src", str(tmp_path / "t")
    land(source, "2024-01/a.json", json.dumps({"id": 1}) + "\n")
    land(source, "2024-02/b.json", json.dumps({"id": 2}) + "\n")
    land(source, "notes.txt", "not data\n")

    only_january = copy_into(spark, table_path=table, source=source, format="json", pattern="2024-01/*.json", store=store)
    the_rest = copy_into(spark, table_path=table, source=source, format="json", pattern="*.json", store=store)

    assert only_january.loaded == (file_uri(source / "2024-01/a.json"),)
    assert the_rest.loaded == (file_uri(source / "2024-02/b.json"),) and the_rest.skipped == only_january.loaded
    assert sorted(r.id for r in store.read(spark, table).collect()) == [1, 2]


def test_new_columns_need_merge_schema(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    source, table = tmp_path / "src", str(tmp_path / "t")
    land(source, "1.json", json.dumps({"id": 1}) + "\n")
    copy_into(spark, table_path=table, source=source, format="json", store=store)
    land(source, "2.json", json.dumps({"id": 2, "ward": "A"}) + "\n")

    with pytest.raises(SchemaMismatchError, match="ward"):
        copy_into(spark, table_path=table, source=source, format="json", store=store)
    # The failed load is not remembered: its file loads when the schema may grow.
    merged = copy_into(spark, table_path=table, source=source, format="json", store=store, merge_schema=True)

    assert merged.loaded == (file_uri(source / "2.json"),)
    assert sorted((r.id, r.ward) for r in store.read(spark, table).collect()) == [(1, None), (2, "A")]
    assert store.committed_batch(table, COPY_INTO_APP_ID) == merged.load_id == 1
    assert [f.path for f in copied_files(table, store=store)] == [file_uri(source / "1.json"), file_uri(source / "2.json")]


def test_empty_files_load_no_rows_and_create_nothing(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    source, table = tmp_path / "src", str(tmp_path / "t")
    empty = land(source, "empty.json", "")

    result = copy_into(spark, table_path=table, source=source, format="json", store=store)

    assert (result.loaded, result.rows_written, result.version) == ((file_uri(empty),), 0, None)
    assert not store.exists(table)
    land(source, "1.json", json.dumps({"id": 1}) + "\n")
    assert copy_into(spark, table_path=table, source=source, format="json", store=store).rows_written == 1


def test_the_copy_into_command_loads_new_files_once_and_says_what_it_skipped(
    spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``lakehouse copy-into`` in this process (it reuses the session), as a user types it."""
    source = tmp_path / "patients"
    first = land(source, "a.csv", "mrn,name\n1,ada\n2,bob\n")
    args = ["copy-into", "bronze.patients_copy", "--from", str(source), "--format", "csv",
            "--option", "header=true", "--option", "inferSchema=true", "--root", str(settings.root)]

    assert main(args) == 0
    said = capsys.readouterr().out
    assert "bronze.patients_copy: loaded 1 file(s), 2 row(s) as version 1; skipped 0" in said, said
    assert file_uri(first) in said

    second = land(source, "b.csv", "mrn,name\n3,cy\n")
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["loaded"], report["skipped"], report["rows_written"]) == ([file_uri(second)], [file_uri(first)], 1)

    table = str(settings.table_path("bronze", "patients_copy"))
    assert sorted(tuple(r) for r in store.read(spark, table).select("mrn", "name").collect()) == [
        (1, "ada"), (2, "bob"), (3, "cy")]


def test_the_copy_into_command_refuses_a_missing_folder_or_a_bad_option_before_starting_spark(
    settings: LakehouseSettings, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    missing = tmp_path / "nowhere"
    assert main(["copy-into", "bronze.x", "--from", str(missing), "--format", "json", "--root", str(settings.root)]) == 2
    assert f"{missing}: it is not a folder" in capsys.readouterr().err
    assert main(["copy-into", "bronze.x", "--from", str(tmp_path), "--format", "json", "--option", "header"]) == 2
    assert "give KEY=VALUE" in capsys.readouterr().err
