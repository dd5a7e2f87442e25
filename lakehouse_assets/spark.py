"""The one way to build a SparkSession for lakehouse_assets.

Sessions are built on demand, never at import: Dagster imports the definitions in several
processes, and a JVM start costs seconds.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dagster_pyspark import LazyPySparkResource
from pydantic import Field
from pyspark.sql import SparkSession

from lakehouse_assets.settings import LakehouseSettings

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
}

# Needed for correctness everywhere, local or cluster.
REQUIRED_CONF: Mapping[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    # Delta rejects INT96 timestamps, which Spark writes by default.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # Data files become visible through the Delta log only; no _SUCCESS markers beside them.
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Progress reports are how a run counts its batches and rows; keep them all.
    "spark.sql.streaming.numRecentProgressUpdates": "10000",
}


def build_spark_session(
    settings: LakehouseSettings | None = None,
    *,
    app_name: str = "lakehouse_assets",
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start (or reuse) the process's SparkSession, configured for the lakehouse.

    Local masters get defaults sized for a small machine; ``settings.spark_conf`` and
    ``extra_conf`` override them. Python workers run this interpreter, so they see the same
    packages (pyarrow, deltalake) as the driver.
    """
    settings = settings or LakehouseSettings.from_env()
    is_local = settings.spark_master.startswith("local")
    if is_local:
        # Spark starts Python workers with PYSPARK_PYTHON, which defaults to the system
        # interpreter, not this virtualenv.
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    requested = {**settings.spark_conf, **(extra_conf or {})}
    spark = SparkSession.getActiveSession() or _running_session()
    if spark is None:
        conf: dict[str, str] = dict(LOCAL_DEFAULTS) if is_local else {}
        conf.update(requested)
        conf.update(REQUIRED_CONF)
        builder = SparkSession.builder.master(settings.spark_master).appName(app_name)
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    else:
        # A session started elsewhere (a notebook, a test fixture) keeps its own tuning:
        # only what was asked for explicitly, and can change at run time, is applied.
        for key, value in requested.items():
            if spark.conf.isModifiable(key):
                spark.conf.set(key, value)
    # Whoever started the session, the settings that matter for correctness must hold.
    for key, value in REQUIRED_CONF.items():
        if not key.startswith("spark.hadoop."):
            spark.conf.set(key, value)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _running_session() -> SparkSession | None:
    """The process's session when one runs but is not this thread's active session (a run
    on another thread): the builder would otherwise apply the local defaults to it."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is None:
        return None
    return SparkSession.builder.getOrCreate()


class SparkResource(LazyPySparkResource):
    """The run's SparkSession, started on first use (never at import, never per step).

    ``master`` and ``spark_config`` override ``LAKEHOUSE_SPARK_MASTER`` and
    ``LAKEHOUSE_SPARK_CONF``; left empty, the environment decides.
    """

    master: str | None = Field(default=None, description="Spark master URL; default LAKEHOUSE_SPARK_MASTER or local[2]")
    spark_config: dict[str, Any] = Field(default_factory=dict, description="Extra Spark settings")

    def _init_session(self) -> None:
        if self._spark_session is None:
            settings = LakehouseSettings.from_env()
            if self.master:
                settings = replace(settings, spark_master=self.master)
            self._spark_session = build_spark_session(
                settings, extra_conf={k: str(v) for k, v in self.spark_config.items()}
            )
