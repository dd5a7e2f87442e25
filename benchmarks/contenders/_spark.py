"""The SparkSession the hand-written contenders use: the same master and small-machine
settings as lakehouse_assets, so the comparison is of the machinery, not of the tuning."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from lakehouse_assets.spark_conf import LOCAL_DEFAULTS, REQUIRED_CONF

MASTER = "local[2]"
RAW_SCHEMA = "device_id BIGINT, mrn BIGINT, time DOUBLE, heartrate DOUBLE"
PATIENTS_SCHEMA = "mrn BIGINT, name STRING"
BRONZE_SCHEMA = RAW_SCHEMA + ", source_file STRING, receipt_time TIMESTAMP"
SILVER_SCHEMA = "device_id BIGINT, mrn BIGINT, name STRING, time TIMESTAMP, heartrate DOUBLE"


def spark_conf() -> dict[str, str]:
    conf = dict(LOCAL_DEFAULTS)
    conf.update(REQUIRED_CONF)
    return conf


def plain_session(app_name: str) -> SparkSession:
    """A SparkSession as a user would build it in a script, with the project's settings."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = SparkSession.builder.master(MASTER).appName(app_name)
    for key, value in spark_conf().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
