"""plan_changes + read_plan: the rows the commits after a version added, read back through Spark
(as the contract checks read a table's new rows)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakehouse_assets.errors import TableNotFoundError
from lakehouse_assets.storage.changes import plan_changes, read_plan

SCHEMA = "id BIGINT, label STRING"


def _write(spark, store, path, ids, mode="append"):
    df = spark.createDataFrame([(i, f"row {i}") for i in ids], SCHEMA)
    return store.write(df, str(path), mode=mode)


def read_changes(store, spark, path, *, after_version):
    """The rows added after ``after_version`` and the latest version, as the checks read them."""
    plan = plan_changes(store, path, after_version=after_version)
    return read_plan(store, spark, plan), plan.latest_version


def _ids(df) -> list[int]:
    return sorted(r.id for r in df.collect())


def _three_appends(spark, store, path) -> str:
    for ids in ([1, 2, 3], [4, 5], [6]):
        _write(spark, store, path, ids)
    return str(path)


@pytest.fixture(scope="module")
def appended(spark, store, tmp_path_factory):
    """Versions 0, 1, 2 append ids 1-3, 4-5 and 6; read-only for the tests that share it."""
    return _three_appends(spark, store, tmp_path_factory.mktemp("changes") / "things")


@pytest.fixture
def table(spark, store, settings):
    """The same three appends, in a table a test may change."""
    return _three_appends(spark, store, Path(settings.table_path("silver", "things")))


def test_rows_after_a_version_are_only_the_rows_later_commits_added(spark, store, appended):
    df, latest = read_changes(store, spark, appended, after_version=0)

    assert latest == 2 == DeltaTable(appended).version()
    assert _ids(df) == [4, 5, 6]
    assert _ids(read_changes(store, spark, appended, after_version=1)[0]) == [6]


def test_no_version_means_the_whole_table(spark, store, appended):
    df, latest = read_changes(store, spark, appended, after_version=None)

    assert latest == 2
    assert _ids(df) == [1, 2, 3, 4, 5, 6]


def test_nothing_new_reads_no_rows_but_keeps_the_schema(spark, store, appended):
    df, latest = read_changes(store, spark, appended, after_version=2)

    assert latest == 2
    assert df.count() == 0
    assert df.schema == store.snapshot(appended, version=2).schema()
    assert plan_changes(store, appended, after_version=2).versions == "none after 2"


def test_a_range_with_an_overwrite_reads_the_whole_current_table(spark, store, table):
    _write(spark, store, table, [10, 11], mode="overwrite")  # version 3, as a complete-mode batch
    _write(spark, store, table, [12])  # version 4

    plan = plan_changes(store, table, after_version=2)
    df, latest = read_changes(store, spark, table, after_version=2)

    assert plan.whole_table and "version 3" in plan.reason
    assert latest == 4
    assert _ids(df) == [10, 11, 12]
    # After the overwrite, appends are incremental again.
    assert _ids(read_changes(store, spark, table, after_version=3)[0]) == [12]


def test_a_range_with_a_compaction_reads_each_row_once_from_the_whole_table(spark, store, table):
    store.optimize(spark, table)  # version 3: the three files become one, the same rows
    _write(spark, store, table, [7])  # version 4

    plan = plan_changes(store, table, after_version=2)

    assert plan.whole_table and "version 3" in plan.reason, plan
    assert _ids(read_plan(store, spark, plan)) == [1, 2, 3, 4, 5, 6, 7]
    assert _ids(read_changes(store, spark, table, after_version=3)[0]) == [7]


def test_a_version_newer_than_the_table_means_it_was_rebuilt(spark, store, table):
    store.drop(table)
    _write(spark, store, table, [7])

    df, latest = read_changes(store, spark, table, after_version=2)

    assert latest == 0
    assert _ids(df) == [7]


def test_plan_names_the_versions_it_reads(store, appended):
    assert plan_changes(store, appended, after_version=0).versions == "1-2"
    assert plan_changes(store, appended, after_version=1).versions == "2"
    assert plan_changes(store, appended, after_version=None).versions == "whole table at 2"
    assert plan_changes(store, appended, after_version=0).first_version == 1


def test_table_identity_changes_when_the_table_is_rebuilt(spark, store, table):
    before = store.table_id(table)
    _write(spark, store, table, [8])
    assert store.table_id(table) == before

    store.drop(table)
    _write(spark, store, table, [9])

    assert store.table_id(table) != before


def test_a_missing_table_is_named(spark, store, settings):
    path = Path(settings.table_path("silver", "missing"))
    with pytest.raises(TableNotFoundError, match="missing"):
        read_changes(store, spark, str(path), after_version=None)
