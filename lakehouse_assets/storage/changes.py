"""What recent versions of a table added: the rows of a version range, for incremental checks
(docs/quality.md). When the later version holds every data file the earlier one held, the rows
added in between are exactly the files it gained, which Spark's executors read alone; a range
that removed files has no such answer, and the whole current table is read instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.errors import LakehouseError, TableNotFoundError

if TYPE_CHECKING:
    from lakehouse_assets.storage.delta import DeltaTableStore


@dataclass(frozen=True)
class ChangePlan:
    """Which rows of a table a read of "changes after ``after_version``" returns.

    ``whole_table`` is True when the answer is the table as it stands at
    ``latest_version`` (no ``after_version``, a range that removed data, or a version the
    log no longer holds); otherwise ``files`` are the data files versions
    ``first_version``..``latest_version`` added (empty when nothing was committed since).
    """

    path: str
    after_version: int | None
    latest_version: int
    whole_table: bool
    files: tuple[str, ...] = ()
    reason: str = ""

    @property
    def first_version(self) -> int:
        """The oldest version whose rows are included (0 for the whole table)."""
        if self.whole_table or self.after_version is None:
            return 0
        return self.after_version + 1

    @property
    def versions(self) -> str:
        """The versions read, for people: ``"5-7"``, ``"7"``, ``"none after 7"`` or
        ``"whole table at 7"``."""
        if self.whole_table:
            return f"whole table at {self.latest_version}"
        if self.first_version > self.latest_version:
            return f"none after {self.latest_version}"
        if self.first_version == self.latest_version:
            return str(self.latest_version)
        return f"{self.first_version}-{self.latest_version}"


def plan_changes(store: DeltaTableStore, path: str, *, after_version: int | None) -> ChangePlan:
    """Decide how to read the rows committed after ``after_version`` (None: all rows).

    Lists the files of the two snapshots, never the data. Raises
    :class:`~lakehouse_assets.errors.TableNotFoundError` when there is no table at ``path``.
    """
    path = str(path)
    latest = store.version(path)
    if latest is None:
        raise TableNotFoundError(path)
    if after_version is None:
        return ChangePlan(path, None, latest, True, reason="no earlier version given")
    if after_version > latest:
        # The table is younger than the version asked about: it was dropped and rebuilt.
        return ChangePlan(path, after_version, latest, True,
                          reason=f"version {after_version} is newer than the table's latest ({latest})")
    try:
        before = {f.path for f in store.snapshot(path, version=after_version).files()}
    except LakehouseError as exc:
        # Log cleanup removed the version: the range can no longer be read piecewise.
        return ChangePlan(path, after_version, latest, True, reason=f"version {after_version} cannot be read ({exc})")
    now = store.snapshot(path, version=latest)
    files = [f.path for f in now.files()]
    if not before <= set(files):
        return ChangePlan(path, after_version, latest, True,
                          reason=_removal(store, path, after_version, latest))
    return ChangePlan(path, after_version, latest, False, files=tuple(f for f in files if f not in before))


def read_plan(store: DeltaTableStore, spark: SparkSession, plan: ChangePlan) -> DataFrame:
    """The rows ``plan`` describes, read by Spark's executors from the data files the log lists
    (delta-rs), with the table's schema at ``plan.latest_version`` (files written before a
    column was added read it as null). The whole table is read by Delta's own reader only when
    its files do not hold its rows plainly (column mapping, deletion vectors): that reader
    first computes the version's snapshot, in Spark jobs."""
    snapshot = store.snapshot(plan.path, version=plan.latest_version)
    if plan.whole_table and not snapshot.plain_files():
        return store.read(spark, plan.path, version=plan.latest_version)
    files = [f.path for f in snapshot.files()] if plan.whole_table else list(plan.files)
    if not files:
        return spark.createDataFrame([], snapshot.schema())
    reader = spark.read.schema(snapshot.schema())
    if snapshot.partition_columns:
        # Partition values live in the folder names, which Spark reads relative to the table.
        reader = reader.option("basePath", plan.path)
    return reader.parquet(*files)


def _removal(store: DeltaTableStore, path: str, after_version: int, latest: int) -> str:
    """Which commit of the range removed files, for people: the newest that did not only
    append, by its history."""
    for entry in store.history(path, limit=latest - after_version):
        mode = str(entry.parameters.get("mode") or entry.parameters.get("outputMode") or "")
        if entry.version > after_version and mode.lower() != "append":
            return f"version {entry.version} removed data ({entry.operation})"
    return f"a version after {after_version} removed data"


__all__ = ["ChangePlan", "plan_changes", "read_plan"]
