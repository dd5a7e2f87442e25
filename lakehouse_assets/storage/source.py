"""A Delta table as a Structured Streaming source, through PySpark's Python Data Source API.

Offsets are positions in the table's history, as in Delta's own source:
``{"version": v, "index": i, "snapshot": s}`` means every data file up to the ``i``-th file
of version ``v`` has been read. A new query first reads the table as it stands (the
snapshot, ``snapshot=True``), then the files each later commit adds. Offsets live in the
query's checkpoint, so a restarted query goes on where it stopped. Rows are read on the
executors, one Parquet file per Spark partition.

With ``readChangeFeed``, the stream is the table's change data feed instead: each version's
change files (``cdc`` actions) when it has them, else its added files as inserts and its
removed files as deletes, every row with ``_change_type``, ``_commit_version`` and
``_commit_timestamp``; the snapshot a new query starts from reads as inserts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from lakehouse_assets.errors import StreamSourceError
from lakehouse_assets.storage._checkpoint_files import BatchOffsets
from lakehouse_assets.storage._delta_log import (
    DataFile,
    latest_version,
    read_commit,
    snapshot_files,
    snapshot_schema,
)
from lakehouse_assets.storage._files import Location, locate
from lakehouse_assets.storage._schema import arrow_to_spark, spark_to_arrow
from lakehouse_assets.storage.change_feed import ChangeFile, change_files, with_change
from lakehouse_assets.storage.changes import table_id
from lakehouse_assets.storage.engine import StreamOptions

SOURCE_NAME = "lakehouse_delta"
# A position in the stream as Spark stores it in the checkpoint: a JSON object.
Offset = dict[str, Any]
# Marks the error raised when the table's schema grew under a running query; the stream
# runner restarts the query once to pick up the new columns.
SCHEMA_CHANGED_MARKER = "LAKEHOUSE_SOURCE_SCHEMA_CHANGED"

_NOT_STARTED = {"version": -1, "index": -1, "snapshot": True}

def read_delta_stream(spark: SparkSession, path: str, schema: T.StructType, options: StreamOptions) -> DataFrame:
    """A streaming DataFrame over the Delta table at ``path``."""
    spark.dataSource.register(DeltaStreamDataSource)
    reader = spark.readStream.format(SOURCE_NAME).schema(schema).option("path", path)
    return reader.options(**options.reader_options()).load()


class DeltaStreamDataSource(DataSource):
    """``spark.readStream.format("lakehouse_delta").option("path", ...)``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> T.StructType:
        from deltalake import DeltaTable

        table = DeltaTable(self.options["path"])
        return arrow_to_spark(pa.schema(table.schema().to_arrow()))

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        return DeltaStreamReader(dict(self.options), schema)


@dataclass(frozen=True)
class _Position:
    version: int
    snapshot: bool
    index: int

    def offset(self) -> Offset:
        return {"version": self.version, "index": self.index, "snapshot": self.snapshot}


@dataclass(frozen=True)
class _SchemaBoundary:
    version: int
    new_schema: str


class DeltaFilePartition(InputPartition):
    """One data file to read."""

    def __init__(self, data_file: DataFile) -> None:
        super().__init__(data_file.path)
        self.path = data_file.path
        self.partition_values = data_file.partition_values
        self.change = (
            (data_file.change_type, data_file.commit_version, data_file.commit_timestamp_ms)
            if isinstance(data_file, ChangeFile) else None)


class DeltaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from the Delta log and reads their files."""

    def __init__(self, options: dict[str, str], schema: T.StructType) -> None:
        # Spark hands a data source its options with lower-cased names (a CaseInsensitiveDict,
        # which dict() copies as stored): look every option up by its lower-cased name.
        options = {str(k).lower(): v for k, v in options.items()}
        self.path = options["path"]
        starting = options.get("startingversion")
        self.starting_version = None if starting in (None, "latest") else int(starting)
        self.start_at_latest = starting == "latest"
        max_files = options.get("maxfilespertrigger")
        self.max_files = int(max_files) if max_files else None
        max_bytes = options.get("maxbytespertrigger")
        self.max_bytes = int(max_bytes) if max_bytes else None
        self.skip_change_commits = str(options.get("skipchangecommits", "false")).lower() == "true"
        self.ignore_deletes = str(options.get("ignoredeletes", "false")).lower() == "true"
        self.read_change_feed = str(options.get("readchangefeed", "false")).lower() == "true"
        self.schema_json = schema.json()
        self._available_now_version: int | None = None
        self._known_version: int | None = None
        self._id: str | None = None

    # -- planning (runs in the driver's Python worker) ----------------------------------------
    def initialOffset(self) -> Offset:
        if self.start_at_latest:
            return self._stamp({"version": latest_version(self.path) + 1, "index": -1, "snapshot": False})
        if self.starting_version is not None:
            return self._stamp({"version": self.starting_version, "index": -1, "snapshot": False})
        return self._stamp(dict(_NOT_STARTED))

    def _stamp(self, offset: Offset) -> Offset:
        """An offset that also names the table it is a position in, and which incarnation of
        it: the checkpoint then tells on its own whether the table has moved on, and a table
        recreated under the same path (a full refresh) is not mistaken for the old one."""
        return {**offset, "table": self.path, "tableId": self._table_id()}

    def _table_id(self) -> str:
        if self._id is None:
            self._id = table_id(self.path)
        return self._id

    def _check_same_table(self, start: Offset) -> None:
        recorded = start.get("tableId")
        if recorded is not None and recorded != self._table_id():
            raise StreamSourceError(
                f"Delta table {self.path} was recreated (id {recorded} is now {self._table_id()}), "
                "probably by a full refresh, since this query last read it. Its checkpoint's "
                "positions mean nothing in the new table: full-refresh the table this query "
                "writes too (lakehouse reset <layer.table>)."
            )

    def prepareForTriggerAvailableNow(self) -> None:
        # availableNow reads what was committed when the query started, no more.
        self._available_now_version = latest_version(self.path)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_files:
            return ReadMaxFiles(self.max_files)
        return ReadMaxBytes(self.max_bytes) if self.max_bytes else ReadAllAvailable()

    def latestOffset(self, start: Offset, limit: ReadLimit) -> Offset:
        self._check_same_table(start)
        upto = self._upto()
        # Spark asks for everything (a once trigger) or for the default limit; Python sources
        # have no composite limit, so with both options set each is applied from the options.
        limited = not isinstance(limit, ReadAllAvailable)
        max_files = self.max_files if limited else None
        max_bytes = self.max_bytes if limited else None
        last: _Position | None = None
        count = size = 0
        for item in self._walk(start, snapshot_version=upto, upto=upto):
            if isinstance(item, _SchemaBoundary):
                if count == 0:
                    raise StreamSourceError(
                        f"{SCHEMA_CHANGED_MARKER}: the schema of Delta table {self.path} changed at "
                        f"version {item.version} to {item.new_schema}. Restart the streaming query "
                        "to read with the new schema."
                    )
                break
            last = item[0]
            count += 1
            size += item[1].size
            if max_files is not None and count >= max_files:
                break
            if max_bytes is not None and size >= max_bytes:
                break  # Delta's soft limit: the file that reaches it is still in the batch
        return start if last is None else self._stamp(last.offset())

    def partitions(self, start: Offset, end: Offset) -> list[InputPartition]:
        if start == end:
            return []
        end_position = _Position(end["version"], end["snapshot"], end["index"])
        parts: list[InputPartition] = []
        for item in self._walk(start, snapshot_version=end["version"], upto=end["version"]):
            if isinstance(item, _SchemaBoundary):
                continue
            position, data_file = item
            parts.append(DeltaFilePartition(data_file))
            if position == end_position:
                break
        return parts

    def commit(self, end: Offset) -> None:
        """Nothing to release: offsets live in Spark's checkpoint."""

    def _upto(self) -> int:
        if self._available_now_version is not None:
            return self._available_now_version
        self._known_version = latest_version(self.path, self._known_version)
        return self._known_version

    def _walk(
        self, start: Offset, *, snapshot_version: int, upto: int
    ) -> Iterator[tuple[_Position, DataFile] | _SchemaBoundary]:
        """Every data file after ``start``, in order, up to version ``upto``."""
        if start["snapshot"]:
            version = start["version"] if start["version"] >= 0 else snapshot_version
            schema_string = snapshot_schema(self.path, version)
            if not self._reads_schema(schema_string):
                # The table grew after this query was built: reading the snapshot with the
                # query's schema would drop the new columns silently.
                yield _SchemaBoundary(version, schema_string)
                return
            files: list[DataFile] = snapshot_files(self.path, version)
            if self.read_change_feed:
                at_ms = read_commit(self.path, version).timestamp_ms
                files = [ChangeFile(f.path, f.size, f.partition_values, "insert", version, at_ms) for f in files]
            for index, data_file in enumerate(files):
                if index > start["index"]:
                    yield _Position(version, True, index), data_file
            next_version, skip_through = version + 1, -1
        else:
            next_version, skip_through = start["version"], start["index"]
        for version in range(next_version, upto + 1):
            commit = read_commit(self.path, version)
            if commit.schema_string is not None and not self._reads_schema(commit.schema_string):
                yield _SchemaBoundary(version, commit.schema_string)
            if self.read_change_feed:
                for index, data_file in enumerate(change_files(commit)):
                    if not (version == next_version and index <= skip_through):
                        yield _Position(version, False, index), data_file
                continue
            if commit.removes_data:
                if self.skip_change_commits or (self.ignore_deletes and not commit.added):
                    continue
                raise StreamSourceError(
                    f"Delta table {self.path} changed existing rows at version {version} "
                    f"({commit.operation}); a streaming read only follows appends. Set "
                    "skipChangeCommits to ignore such commits (ignoreDeletes: those that only "
                    "delete), or full-refresh the downstream table."
                )
            for index, data_file in enumerate(commit.added):
                if version == next_version and index <= skip_through:
                    continue
                yield _Position(version, False, index), data_file

    def _reads_schema(self, schema_string: str) -> bool:
        """Whether every column of a version's schema is one this query reads, with its type."""
        from deltalake import Schema

        version_schema = arrow_to_spark(pa.schema(Schema.from_json(schema_string).to_arrow()))
        ours = {f.name.lower(): f.dataType for f in T.StructType.fromJson(json.loads(self.schema_json)).fields}
        return all(ours.get(f.name.lower()) == f.dataType for f in version_schema.fields)

    # -- reading (runs on the executors) ------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, DeltaFilePartition)
        target = spark_to_arrow(T.StructType.fromJson(json.loads(self.schema_json)))
        parquet = pq.ParquetFile(partition.path)
        present = {name.lower(): name for name in parquet.schema_arrow.names}
        columns = [present[f.name.lower()] for f in target if f.name.lower() in present]
        for batch in parquet.iter_batches(batch_size=65_536, columns=columns):
            conformed = _conform(batch, target, partition.partition_values)
            yield conformed if partition.change is None else with_change(conformed, *partition.change)


def _conform(batch: pa.RecordBatch, target: pa.Schema, partition_values: dict[str, str | None]) -> pa.RecordBatch:
    """The batch with the target's columns and types; columns a file predates are null."""
    by_name = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    arrays = []
    for field in target:
        index = by_name.get(field.name.lower())
        if index is not None:
            column = batch.column(index)
            arrays.append(column if column.type == field.type else column.cast(field.type))
        elif field.name in partition_values:
            value = partition_values[field.name]
            arrays.append(pa.array([value] * batch.num_rows, pa.string()).cast(field.type))
        else:
            arrays.append(pa.nulls(batch.num_rows, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def has_unread_data(checkpoint_location: str) -> bool | None:
    """Whether the query checkpointed at ``checkpoint_location`` has committed Delta versions
    it has not read yet: True, False, or None when the checkpoint cannot tell (no batch
    yet, or a source other than a Delta table).

    Read from the checkpoint alone, without starting a query: a materialization with
    nothing to read then costs no query start-up at all.
    """
    checkpoint = locate(checkpoint_location)
    last_offsets = _last_batch(checkpoint.child("offsets"))
    if last_offsets is None:
        return None
    if _last_batch(checkpoint.child("commits")) != last_offsets:
        return True  # a planned batch was never committed: the query must finish it
    lines = checkpoint.child("offsets", str(last_offsets)).read_text().splitlines()
    for line in lines[2:]:  # "v1", the batch metadata, then one offset per source
        try:
            offset = json.loads(line)
        except ValueError:
            return None
        if not isinstance(offset, dict) or "table" not in offset or "version" not in offset:
            return None
        table, version = str(offset["table"]), int(offset["version"])
        if offset.get("tableId") != _current_table_id(table):
            return True  # recreated: let the query start and say so
        latest = latest_version(table, max(version, 0))
        if any(_gives_the_query_work(table, v) for v in range(max(version, -1) + 1, latest + 1)):
            return True
    return False


def delta_source_end(offsets: BatchOffsets) -> Offset | None:
    """Where a batch's Delta table source ended (an offset this module's reader gave, naming
    its table), from the offsets Spark logged for the batch; None when it streams no Delta table."""
    return next((source for source in offsets.sources
                 if isinstance(source, dict) and source.get("table") and "version" in source), None)


def version_read_whole(offset: Offset) -> int | None:
    """The newest version of the table a stream at end ``offset`` (the position of the last
    file it read, as the checkpoint and each batch's commit record it) has read every row of;
    None when it has read no version whole. A version read in part counts as not read."""
    version, index = int(offset.get("version", -1)), int(offset.get("index", -1))
    table = str(offset.get("table") or "")
    if version < 0 or not table:
        return None
    snapshot = bool(offset.get("snapshot"))
    files = snapshot_files(table, version) if snapshot else read_commit(table, version).added
    if index >= len(files) - 1:
        return version
    return None if snapshot or version == 0 else version - 1


def _gives_the_query_work(table_path: str, version: int) -> bool:
    """Whether a version adds rows, removes them or changes the schema; a commit that only
    records a streaming batch's app transaction (an empty batch) gives a reader nothing."""
    commit = read_commit(table_path, version)
    return bool(commit.added) or commit.removes_data or commit.schema_string is not None


def _current_table_id(path: str) -> str | None:
    try:
        return table_id(path)
    except Exception:  # missing or unreadable: the query itself will report it properly
        return None


def _last_batch(folder: Location) -> int | None:
    if not folder.exists():
        return None
    batches = [
        int(info.base_name)
        for info in folder.fs.get_file_info(pafs.FileSelector(folder.path, recursive=False))
        if info.base_name.isdigit()
    ]
    return max(batches) if batches else None
