"""The Spark settings a lakehouse driver starts with, embedded or as a Spark Connect engine:
defaults sized for a small machine, the user's settings, then what correctness requires.

Its own module, below both the session factory (:mod:`lakehouse_assets.spark`) and the
engine (:mod:`lakehouse_assets.engine`), so that each can ask without importing the other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.settings import DELTA_JAR_SUMS, LakehouseSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Sized for a 2-core machine; every value can be overridden through LAKEHOUSE_SPARK_CONF.
LOCAL_DEFAULTS: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    # 1 GiB of heap holds a 2-core machine's work (a few million small records per batch) and keeps
    # the whole run (JVM, driver, Python workers) near 2 GiB; raise it through LAKEHOUSE_SPARK_CONF.
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.python.worker.reuse": "true",
    # A local driver talks only to itself: bind to loopback, not to whatever the host name
    # resolves to.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    # Listing more than 32 explicit paths otherwise runs a Spark job: a 1,000-file
    # micro-batch took 21 s instead of 1.2 s to plan on this machine.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
    # Delta's VACUUM lists and diffs a table's files in this many partitions (10,000 by
    # default): on two cores a week of small files took minutes of empty tasks.
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    # Every hash join's build side takes at least one page (32 MiB from this heap), kept by an
    # engine with each stopped query (docs/engines.md); a page grows past this when a row needs it.
    "spark.buffer.pageSize": "2m",
    # Delta's table state, rebuilt for every idempotent write: 0.7 s instead of 4-6 s (docs/reliability.md).
    "spark.databricks.delta.snapshotPartitions": "1",
    # One run of the reference graph has more than the default 100 query shapes: 15% less CPU.
    "spark.sql.codegen.cache.maxEntries": "1000",
}

# Needed for correctness everywhere, local or cluster.
REQUIRED_CONF: Mapping[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    # Delta rejects INT96 timestamps, which Spark writes by default.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # Data files become visible through the Delta log only; no _SUCCESS markers beside them.
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # pyspark 4.2.0 runs Python UDFs through Arrow by default, and its columnar Arrow runner
    # (a UDF straight over a Parquet or Delta scan) sends the worker a message it cannot parse:
    # the task waits forever (SPARK-58241, fixed after 4.2.0). Row-at-a-time pickled UDFs work.
    "spark.sql.execution.pythonUDF.arrow.enabled": "false",
    # Progress reports are how a run counts its batches and rows; keep them all.
    "spark.sql.streaming.numRecentProgressUpdates": "10000",
}


# Settings fixed when a driver starts (Spark refuses them later): global temporary views live in
# `system`, so the event log's view is `system.event_log` (lakehouse_assets.tables.event_log).
REQUIRED_STATIC_CONF: Mapping[str, str] = {
    "spark.sql.globalTempDatabase": "system",
}


# Delta Lake's connector: its SQL (MERGE, DESCRIBE HISTORY, OPTIMIZE, ...) and its catalog.
DELTA_CONF: Mapping[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # A checksum file beside each commit (its protocol, metadata, app transactions and, for a
    # small table, its files): Delta then loads a new version of a table without a Spark job
    # over its log, which a run did several times per table it touched.
    "spark.databricks.delta.writeChecksumFile.enabled": "true",
    "spark.databricks.delta.incremental.commit.enabled": "true",
    "spark.databricks.delta.allFilesInCrc.enabled": "true",
    "spark.databricks.delta.setTransactionsInCrc.writeOnCommit": "true",
}


def engine_conf(settings: LakehouseSettings, extra_conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings a Spark driver of the lakehouse starts with, embedded or as an engine:
    local defaults for a ``local[...]`` master, S3A's for the object store, then the user's settings, then what
    correctness requires, Delta Lake's jars (after any jars of the user's) and its connector, and
    the driver's JVM maps the classes archived at install (:mod:`lakehouse_assets.class_archive`)."""
    conf: dict[str, str] = dict(LOCAL_DEFAULTS) if settings.spark_master.startswith("local") else {}
    conf.update({f"spark.hadoop.{key}": value for key, value in settings.object_store.hadoop_conf().items()})
    conf.update(settings.spark_conf)
    conf.update(extra_conf or {})
    conf.update(REQUIRED_CONF)
    conf.update(REQUIRED_STATIC_CONF)
    java_options = archive_options(settings, conf.get("spark.driver.extraJavaOptions", ""))
    if java_options:
        conf["spark.driver.extraJavaOptions"] = java_options
    jars = [conf["spark.jars"]] if conf.get("spark.jars") else []
    conf["spark.jars"] = ",".join([*jars, *(str(path) for path in delta_jars(settings.delta_jars))])
    conf.update(DELTA_CONF)
    return conf


#: Spark's and Delta Lake's classes, archived at install (:mod:`lakehouse_assets.class_archive`).
ARCHIVE_NAME = "spark-classes.jsa"
#: Java options a driver's own options may hold that already choose how it shares classes.
_SHARING_OPTIONS = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare")


def archive_path(settings: LakehouseSettings) -> Path:
    """Where the archive is: beside Delta Lake's jars, which it is made with."""
    return settings.delta_jars / ARCHIVE_NAME


def archive_options(settings: LakehouseSettings, java_options: str = "") -> str:
    """``java_options`` with the archive added, when it exists and the options do not already
    choose how the JVM shares classes. The JVM's notes on an archive it cannot use (after a
    JDK or pyspark upgrade) are silenced: it then starts as it would without one."""
    archive = archive_path(settings)
    if not archive.is_file() or any(option in java_options for option in _SHARING_OPTIONS):
        return java_options
    return f"{java_options} -XX:SharedArchiveFile={archive} -Xlog:cds=off,cds+dynamic=off".strip()


def delta_jars(folder: Path, sums: Path = DELTA_JAR_SUMS) -> list[Path]:
    """Delta Lake's jars in ``folder``, each checked against its committed SHA-256 sum: a
    missing or altered jar stops the driver before it starts, rather than failing it later
    on a missing class (or running code nobody reviewed)."""
    lines = [line.split(maxsplit=1) for line in sums.read_text().splitlines() if line.strip()]
    expected = {name: digest for digest, name in lines}
    missing = [name for name in sorted(expected) if not (folder / name).is_file()]
    if missing:
        raise ConfigurationError(
            f"Delta Lake's jars are missing from {folder} ({', '.join(missing)}): run `make install`, which "
            "resolves them with Maven; an air-gapped site puts the files jars/SHA256SUMS lists there "
            "(or in the folder LAKEHOUSE_DELTA_JARS names)")
    altered = [name for name in sorted(expected)
               if hashlib.sha256((folder / name).read_bytes()).hexdigest() != expected[name]]
    if altered:
        raise ConfigurationError(
            f"Delta Lake's jars in {folder} do not match jars/SHA256SUMS ({', '.join(altered)}): run "
            "`make install` to resolve them again, or restore the files the sums name")
    return [folder / name for name in sorted(expected)]


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` on the session for the statements run inside, as they were afterwards:
    Delta reads some options of a statement (its commit's app transaction, VACUUM's
    retention check) only from the session."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)


def is_connect_session(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM in this process)."""
    from pyspark.sql.utils import is_remote

    return is_remote() and type(spark).__module__.startswith("pyspark.sql.connect")
