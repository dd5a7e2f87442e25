"""Table maintenance through Delta Lake: ``OPTIMIZE`` (optionally ``ZORDER BY``) and ``VACUUM``
(docs/operations.md says what each promises). A compaction commits with ``dataChange=false``,
which streams skip. Before VACUUM deletes anything, its files are checked against every streaming
reader of the table, given with the newest version it has read whole (delta-rs lists the files
of each version since): one that has yet to read a file, or whose position no record says, makes
it refuse with :class:`~lakehouse_assets.errors.VacuumRefusedError`, deleting nothing.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.errors import LakehouseError, VacuumRefusedError
from lakehouse_assets.location import Location, local_path, locate
from lakehouse_assets.spark_conf import is_connect_session, session_settings
from lakehouse_assets.storage.delta_rs_snapshot import DeltaRsSnapshot, open_delta_table
from lakehouse_assets.storage.engine import OptimizeResult, StreamReader, VacuumResult
from lakehouse_assets.storage.merge import quote

DEFAULT_RETENTION = dt.timedelta(days=7)
# Delta refuses a retention under its default (a week) unless told the caller checked: the
# table lock keeps this project's writers out, and the readers are checked here.
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# Delta 4.4 ignores a RETAIN of other than 0 hours by default (an internal setting), using
# the table's delta.deletedFileRetentionDuration instead: the retention asked for is meant.
_RETENTION_IGNORED = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"
# The size OPTIMIZE aims at, when one is asked for.
_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
# The folder of a table that holds its change data feed's files.
_CHANGE_DATA = "_change_data"
# Operations whose commits change no rows (dataChange=false): streams skip them.
_NO_DATA_CHANGE = frozenset({"OPTIMIZE"})


def optimize(spark: SparkSession, table: Location, columns: Sequence[str], *, target_size: int | None = None,
             z_order: Sequence[str] | None = None) -> OptimizeResult:
    """Compact the table's small files (into files of about ``target_size`` bytes, else
    Delta's 1 GB), or with ``z_order`` rewrite its files clustered by those columns of the
    table's ``columns``."""
    path = str(table)
    known = {name.lower(): name for name in columns}
    missing = [c for c in z_order or () if c.lower() not in known]
    if missing:
        raise LakehouseError(
            f"Cannot Z-order Delta table {path} by {missing}: it has no such column (its columns: "
            f"{', '.join(columns)}). Give columns of the table.")
    clustered = tuple(known[c.lower()] for c in z_order or ())
    statement = f"OPTIMIZE delta.{quote(path)}"
    if clustered:
        statement += f" ZORDER BY ({', '.join(quote(c) for c in clustered)})"
    settings = {_MAX_FILE_SIZE: str(target_size)} if target_size else {}
    try:
        with session_settings(spark, settings):
            metrics = spark.sql(statement).first()["metrics"]  # type: ignore[index]
    except Exception as exc:  # Spark's errors name no common base over Connect
        raise LakehouseError(
            f"Compaction of Delta table {path} failed: {exc}. Nothing was changed (a compaction commits "
            "all or nothing); run it again, when no other writer is changing the table's files.") from exc
    if not metrics["numFilesRemoved"]:
        return OptimizeResult(path, None, z_order=clustered)
    return OptimizeResult(
        path, open_delta_table(table).version(), files_removed=int(metrics["numFilesRemoved"]),
        files_added=int(metrics["numFilesAdded"]), bytes_removed=int(metrics["filesRemoved"]["totalSize"] or 0),
        bytes_added=int(metrics["filesAdded"]["totalSize"] or 0), z_order=clustered)


def vacuum(spark: SparkSession, table: Location, *, retention: dt.timedelta, dry_run: bool,
           readers: Sequence[StreamReader]) -> VacuumResult:
    """Delete (or with ``dry_run`` list) the files the table has not listed for longer than
    ``retention`` (in whole hours, rounded up), after checking that none of them is still to
    be read by one of ``readers``."""
    path = str(table)
    if retention < dt.timedelta(0):
        raise LakehouseError(f"Cannot vacuum Delta table {path} with a negative retention ({retention}).")
    hours = math.ceil(retention.total_seconds() / 3600)
    statement = f"VACUUM delta.{quote(path)} RETAIN {hours} HOURS"
    with session_settings(spark, {_RETENTION_CHECK: "false", _RETENTION_IGNORED: "false"}):
        with _console_to_stderr(spark):
            candidates = sorted(local_path(row["path"]) for row in spark.sql(statement + " DRY RUN").collect())
        if candidates:
            _refuse_if_needed(table, candidates, readers, hours)
        files = tuple(os.path.relpath(f, path) for f in candidates)
        result = VacuumResult(path, dt.timedelta(hours=hours), dry_run, files,
                              sum(_size(table, file) for file in candidates), tuple(readers))
        if not dry_run and candidates:
            # The table lock keeps writers out, so the files deleted are those checked above.
            with _console_to_stderr(spark):
                spark.sql(statement).collect()
    return result


def _refuse_if_needed(table: Location, candidates: Sequence[str], readers: Sequence[StreamReader],
                      hours: int) -> None:
    path = str(table)
    doomed = set(candidates)
    latest = open_delta_table(table).version()
    needed_after: dict[int, set[str]] = {}  # readers at one version (the usual case) share a listing
    for reader in readers:
        if reader.version is None:
            raise VacuumRefusedError(
                f"Not vacuuming Delta table {path}: the streaming query writing {reader.name} (checkpoint "
                f"{reader.checkpoint}) may still read it, and no materialization of {reader.name} records "
                f"how far it has read (upstream_versions), so which of the {len(doomed)} files this would "
                f"delete it needs is unknown. Materialize {reader.name} (its run records it), or reset it "
                f"(`lakehouse reset {reader.name} --yes`), then vacuum again. Nothing was deleted.")
        if reader.version >= latest:
            continue  # read whole: every file a version of it removed was read before
        try:
            if reader.version not in needed_after:
                needed_after[reader.version] = _files_still_needed(table, reader.version, latest, candidates)
            needed = needed_after[reader.version]
        except LakehouseError as exc:
            raise VacuumRefusedError(
                f"Not vacuuming Delta table {path}: the streaming query writing {reader.name} (checkpoint "
                f"{reader.checkpoint}) has read it to version {reader.version}, which cannot be read any "
                f"more ({exc}), so which files it still needs is unknown. Reset {reader.name} "
                f"(`lakehouse reset {reader.name} --yes`), then vacuum again.") from exc
        clash = needed & doomed
        if not clash:
            continue
        waited = dt.datetime.now(dt.UTC) - _commit_time(table, reader.version + 1)
        needs = max(1, math.ceil(waited.total_seconds() / 3600))
        raise VacuumRefusedError(
            f"Not vacuuming Delta table {path} with a retention of {hours} hours: the streaming query "
            f"writing {reader.name} (checkpoint {reader.checkpoint}) has read it to version {reader.version} "
            f"and has yet to read {len(clash)} of the {len(doomed)} files this would delete (e.g. "
            f"{sorted(clash)[0]}). It needs a retention of at least {needs} hours. Keep that much "
            f"(`lakehouse vacuum ... --retain-hours {needs}`), or let {reader.name} catch up first "
            f"(materialize it), then vacuum again. Nothing was deleted.")


def _files_still_needed(table: Location, read_through: int, latest: int, candidates: Sequence[str]) -> set[str]:
    """Of ``candidates`` (local paths), those a reader that has read the table whole to version
    ``read_through`` may still read: the data files each later version added, and those each
    removed (a change feed reads them as deletes) unless it was a compaction, which changes
    no rows (delta-rs lists every version's files, its history names the operation); and the
    change data files written since ``read_through`` was committed (no snapshot lists those:
    their time says). Keeping a file too many is safe."""
    operations = {c["version"]: c.get("operation") for c in open_delta_table(table).history(latest - read_through)}
    delta_table = open_delta_table(table, version=read_through)
    before = _listed(table, delta_table)
    needed: set[str] = set()
    for version in range(read_through + 1, latest + 1):
        delta_table.load_as_version(version)
        now = _listed(table, delta_table)
        needed |= now - before
        if operations.get(version) not in _NO_DATA_CHANGE:
            needed |= before - now
        before = now
    # A change data file is written before its version commits, and after the version
    # before it did (writers hold the table's lock); a minute's margin covers clock steps.
    since = _commit_time(table, read_through).timestamp() - 60
    changes = {c for c in candidates if _CHANGE_DATA in Path(c).parts and _mtime(table, c) >= since}
    return (needed & set(candidates)) | changes


def _listed(table: Location, version: DeltaTable) -> set[str]:
    return {local_path(f.path) for f in DeltaRsSnapshot(table, version).files()}


@contextmanager
def _console_to_stderr(spark: SparkSession) -> Iterator[None]:
    """Delta's VACUUM prints what it found to the driver's console (stdout); an embedded
    driver shares this process's, where a command's output (JSON) goes. Sent to stderr for
    the statement; an engine's console is its log."""
    jvm = None if is_connect_session(spark) else getattr(spark, "_jvm", None)
    if jvm is None:
        yield
        return
    system = jvm.java.lang.System
    console = system.out
    system.setOut(system.err)
    try:
        yield
    finally:
        system.setOut(console)


def _commit_time(table: Location, version: int) -> dt.datetime:
    """When ``version`` was committed, from the table's history; the oldest commit the
    history still holds when its log was cleaned up since (a reader needs at least that)."""
    if version < 0:
        return dt.datetime.now(dt.UTC)
    delta_table = open_delta_table(table)
    # The latest version's history, searched back: delta-rs's history of a table opened at an
    # older version gives that version's number with the latest commit's time.
    commits = delta_table.history(max(1, delta_table.version() - version + 1))
    chosen = next((c for c in commits if c["version"] == version), min(commits, key=lambda c: c["version"]))
    return dt.datetime.fromtimestamp(chosen["timestamp"] / 1000, dt.UTC)


def _mtime(table: Location, path: str) -> float:
    file = locate(path, table.store).file()
    return float("inf") if file is None else file.mtime_ns / 1e9  # gone already, or unknown: kept


def _size(table: Location, path: str) -> int:
    file = locate(path, table.store).file()
    return 0 if file is None else file.size  # already gone


__all__ = ["DEFAULT_RETENTION", "optimize", "vacuum"]
