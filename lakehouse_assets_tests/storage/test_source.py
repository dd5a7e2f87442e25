"""A Delta table as a streaming source: each committed version once, with Delta's options."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from lakehouse_assets.errors import QueryFailedError
from lakehouse_assets.storage import DeltaRsTableStore, DeltaSink, StreamOptions
from lakehouse_assets.storage.source import SCHEMA_CHANGED_MARKER, read_delta_stream
from lakehouse_assets.streaming import StreamRun, run_stream

from .helpers import collected, sort_rows


def _append(spark: SparkSession, store: DeltaRsTableStore, path: str, ids: range, **kwargs) -> None:
    """One commit of one data file."""
    store.write(spark.createDataFrame([(i,) for i in ids], "id long").coalesce(1), path, **kwargs)


def _stream(spark: SparkSession, store: DeltaRsTableStore, tmp_path: Path, options: StreamOptions | None = None,
            build=None, source: str | None = None, **kwargs) -> StreamRun:
    """Run the query source -> sink once (availableNow), with target and checkpoint under
    tmp_path; the source is tmp_path/source unless given."""
    source = source or str(tmp_path / "source")
    target, checkpoint = str(tmp_path / "target"), str(tmp_path / "checkpoint")
    sink = DeltaSink(store, target, checkpoint, merge_schema=True)
    return run_stream(build or (lambda: store.read_stream(spark, source, options)), sink,
                      checkpoint_location=checkpoint, **kwargs)


def _target_ids(spark: SparkSession, store: DeltaRsTableStore, tmp_path: Path) -> list[int]:
    return sorted(r.id for r in store.read(spark, str(tmp_path / "target")).collect())


def test_each_version_is_read_once_across_restarts_in_batches_of_max_files(
    spark: SparkSession, store: DeltaRsTableStore, tmp_path: Path
) -> None:
    source = str(tmp_path / "source")
    _append(spark, store, source, range(0, 3))
    _append(spark, store, source, range(3, 5))

    first = _stream(spark, store, tmp_path, StreamOptions(max_files_per_trigger=1))

    # One file per micro-batch: two batches, as the query's progress reports show.
    assert first.batches == 2
    assert [p["numInputRows"] for p in first.progress if p["numInputRows"]] == [3, 2]
    assert [c.rows_written for c in first.commits] == [3, 2]
    assert _target_ids(spark, store, tmp_path) == list(range(5))

    _append(spark, store, source, range(5, 7))
    _append(spark, store, source, range(7, 8))
    second = _stream(spark, store, tmp_path, StreamOptions(max_files_per_trigger=1))

    # The restarted query reads the two new versions only, once each, one file per batch.
    assert second.query_id == first.query_id
    assert [p["numInputRows"] for p in second.progress if p["numInputRows"]] == [2, 1]
    assert _target_ids(spark, store, tmp_path) == list(range(8))


@pytest.fixture(scope="module")
def with_overwrite(spark: SparkSession, store: DeltaRsTableStore, tmp_path_factory: pytest.TempPathFactory) -> str:
    """v0: 0-2; v1: 3-4; v2: overwrite with 100-101; v3: 5. Queries only read it."""
    source = str(tmp_path_factory.mktemp("upstream") / "source")
    _append(spark, store, source, range(0, 3))
    _append(spark, store, source, range(3, 5))
    _append(spark, store, source, range(100, 102), mode="overwrite")
    _append(spark, store, source, range(5, 6))
    return source


def test_starting_version_and_skip_change_commits(
    spark: SparkSession, store: DeltaRsTableStore, tmp_path: Path, with_overwrite: str
) -> None:
    run = _stream(spark, store, tmp_path, StreamOptions(starting_version=1, skip_change_commits=True),
                  source=with_overwrite)

    # From version 1 on (version 0 is not read), the overwrite at version 2 is skipped whole.
    assert _target_ids(spark, store, tmp_path) == [3, 4, 5]
    assert run.input_rows == 3


def test_a_change_commit_upstream_stops_the_stream(
    spark: SparkSession, store: DeltaRsTableStore, tmp_path: Path, with_overwrite: str
) -> None:
    with pytest.raises(QueryFailedError) as caught:  # the source's own error, not Spark's wrapping
        _stream(spark, store, tmp_path, StreamOptions(starting_version=1), source=with_overwrite)

    message = str(caught.value)
    assert caught.value.kind == "StreamSourceError" and "JVM" not in message
    assert with_overwrite in message and "version 2" in message and "skipChangeCommits" in message
    assert not store.exists(str(tmp_path / "target"))


def _old_schema_first(spark: SparkSession, store: DeltaRsTableStore, source: str, old_schema, builds: list[str]):
    """A query built before the table grew (with its old schema); rebuilt ones see the table now."""

    def build():
        if not builds:
            builds.append("old schema")
            return read_delta_stream(spark, source, old_schema, StreamOptions())
        builds.append("current schema")
        return store.read_stream(spark, source)

    return build


def test_schema_growth_upstream_stops_the_query_and_a_restart_reads_the_new_column(
    spark: SparkSession, store: DeltaRsTableStore, tmp_path: Path
) -> None:
    source = str(tmp_path / "source")
    _append(spark, store, source, range(0, 2))
    old_schema = store.schema(source)
    _stream(spark, store, tmp_path)  # the query has read the table as it stood
    store.write(spark.createDataFrame([(2, "new")], "id long, note string"), source, merge_schema=True)

    failures: list[str] = []

    def restart_when(exc: StreamingQueryException) -> bool:
        failures.append(str(exc))
        return SCHEMA_CHANGED_MARKER in str(exc)

    builds: list[str] = []
    run = _stream(spark, store, tmp_path, build=_old_schema_first(spark, store, source, old_schema, builds),
                  restart_when=restart_when)

    assert len(failures) == 1 and SCHEMA_CHANGED_MARKER in failures[0] and source in failures[0]
    assert run.restarts == 1 and builds == ["old schema", "current schema"]
    assert collected(store.read(spark, str(tmp_path / "target"))) == sort_rows(
        [{"id": 0, "note": None}, {"id": 1, "note": None}, {"id": 2, "note": "new"}]
    )


def test_schema_growth_before_the_first_batch_is_not_lost(
    spark: SparkSession, store: DeltaRsTableStore, tmp_path: Path
) -> None:
    source = str(tmp_path / "source")
    _append(spark, store, source, range(0, 2))
    old_schema = store.schema(source)
    # The table grows between building the query and its first batch, which reads the
    # table's snapshot: the new column must not be dropped silently.
    store.write(spark.createDataFrame([(2, "new")], "id long, note string"), source, merge_schema=True)

    builds: list[str] = []
    run = _stream(spark, store, tmp_path, build=_old_schema_first(spark, store, source, old_schema, builds),
                  restart_when=lambda exc: SCHEMA_CHANGED_MARKER in str(exc))

    assert run.restarts == 1
    assert collected(store.read(spark, str(tmp_path / "target"))) == sort_rows(
        [{"id": 0, "note": None}, {"id": 1, "note": None}, {"id": 2, "note": "new"}]
    )


def test_a_commit_that_only_records_an_empty_batch_is_nothing_to_read(
    spark: SparkSession, store: DeltaRsTableStore, tmp_path: Path
) -> None:
    from lakehouse_assets.storage import AppTransaction

    source = str(tmp_path / "source")
    _append(spark, store, source, range(3))
    _stream(spark, store, tmp_path)
    checkpoint = str(tmp_path / "checkpoint")
    assert store.stream_has_unread_data(checkpoint) is False

    # An upstream query's empty micro-batch still commits its app transaction.
    before = store.version(source)
    _append(spark, store, source, range(0), transaction=AppTransaction("upstream-query", 0))
    assert store.version(source) == before + 1
    assert store.stream_has_unread_data(checkpoint) is False

    _append(spark, store, source, range(3, 5))
    assert store.stream_has_unread_data(checkpoint) is True
    _stream(spark, store, tmp_path)
    assert _target_ids(spark, store, tmp_path) == list(range(5))


def test_max_bytes_per_trigger_splits_a_backlog_and_a_batch_takes_at_least_one_file(
    spark: SparkSession, store: DeltaRsTableStore, tmp_path: Path
) -> None:
    source = str(tmp_path / "source")
    for first in range(0, 8, 2):
        _append(spark, store, source, range(first, first + 2))
    file_size = min(f.size for f in store.snapshot(source).files())

    tiny = _stream(spark, store, tmp_path / "tiny", StreamOptions(max_bytes_per_trigger=1), source=source)
    two_files = _stream(spark, store, tmp_path / "two", StreamOptions(max_bytes_per_trigger=2 * file_size),
                        source=source)

    assert [p["numInputRows"] for p in tiny.progress if p["numInputRows"]] == [2, 2, 2, 2]
    assert [p["numInputRows"] for p in two_files.progress if p["numInputRows"]] == [4, 4]
    assert _target_ids(spark, store, tmp_path / "two") == list(range(8))


def test_ignore_deletes_passes_over_a_commit_that_only_deletes_but_not_one_that_rewrites(
    spark: SparkSession, store: DeltaRsTableStore, tmp_path: Path
) -> None:
    source = str(tmp_path / "source")
    _append(spark, store, source, range(0, 3))
    _append(spark, store, source, range(3, 5))
    ignoring = lambda: _stream(spark, store, tmp_path / "ignoring", StreamOptions(ignore_deletes=True), source=source)  # noqa: E731
    strict = lambda: _stream(spark, store, tmp_path / "strict", StreamOptions(), source=source)  # noqa: E731
    ignoring()
    strict()  # both have read ids 0-4

    DeltaTable(source).delete("id >= 3")  # removes the second file whole: a delete-only commit
    _append(spark, store, source, range(5, 6))

    assert ignoring().input_rows == 1
    assert _target_ids(spark, store, tmp_path / "ignoring") == [0, 1, 2, 3, 4, 5]
    with pytest.raises(QueryFailedError, match="ignoreDeletes"):
        strict()

    _append(spark, store, source, range(100, 101), mode="overwrite")  # removes and adds: a rewrite
    with pytest.raises(QueryFailedError, match="changed existing rows"):
        ignoring()
