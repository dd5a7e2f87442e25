"""The SparkSession the hand-written contenders use: the same master and small-machine
settings as lakehouse_assets, so the comparison is of the machinery, not of the tuning.

Like every lakehouse_assets driver, the session carries Delta Lake's connector: its jars
(``spark.jars``, the files ``make install`` resolved, checked against their committed sums;
never ``spark.jars.packages``, nothing is downloaded at run time) and its SQL extension and
catalog. A hand-written script on this lakehouse is a Delta Lake script, and its session
start pays for Delta's classes as lakehouse_assets' does.
"""

from __future__ import annotations

import os
import sys
import time

from pyspark.sql import SparkSession

from lakehouse_assets.settings import DEFAULT_DELTA_JARS
from lakehouse_assets.spark_conf import DELTA_CONF, LOCAL_DEFAULTS, REQUIRED_CONF, delta_jars

MASTER = "local[2]"
RAW_SCHEMA = "device_id BIGINT, mrn BIGINT, time DOUBLE, heartrate DOUBLE"
PATIENTS_SCHEMA = "mrn BIGINT, name STRING"
BRONZE_SCHEMA = RAW_SCHEMA + ", source_file STRING, receipt_time TIMESTAMP"
SILVER_SCHEMA = "device_id BIGINT, mrn BIGINT, name STRING, time TIMESTAMP, heartrate DOUBLE"


def spark_conf() -> dict[str, str]:
    """The project's settings without Delta's connector (SDP takes its SQL settings from here:
    its own Connect server has no Delta jars)."""
    conf = dict(LOCAL_DEFAULTS)
    conf.update(REQUIRED_CONF)
    return conf


def delta_conf() -> dict[str, str]:
    """Delta Lake's jars (checked against ``jars/SHA256SUMS``) and its connector's settings,
    as lakehouse_assets' sessions get them (:func:`lakehouse_assets.spark_conf.engine_conf`)."""
    return {"spark.jars": ",".join(str(path) for path in delta_jars(DEFAULT_DELTA_JARS)), **DELTA_CONF}


def plain_session(app_name: str, *, delta: bool = True) -> SparkSession:
    """A SparkSession as a user would build it in a script, with the project's settings and
    Delta Lake's connector (``delta=False``: without it, for the Parquet-only script)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = SparkSession.builder.master(MASTER).appName(app_name)
    for key, value in {**spark_conf(), **(delta_conf() if delta else {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def run_available_now(writer, path: str | None, queries: dict[str, dict], name: str) -> None:  # noqa: ANN001
    """Start ``writer`` (into ``path``, or its foreachBatch) with ``trigger(availableNow=True)``,
    wait for it, and record its wall seconds and Spark's progress split under ``name``."""
    from benchmarks.contenders._profile import progress_summary

    started = time.monotonic()
    writer = writer.trigger(availableNow=True)
    query = writer.start(path) if path is not None else writer.start()
    query.awaitTermination()
    queries[name] = {"seconds": round(time.monotonic() - started, 3), **progress_summary(query.recentProgress)}
