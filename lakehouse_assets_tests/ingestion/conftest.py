"""Fixtures for the ingestion tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

# Spark lists more than 32 explicit file paths with a Spark job of one task per path; on a
# 2-core machine a micro-batch of 1,000 small files then spends ~20 s listing them. Clusters
# want the job; a local session does not (see the report on spark.py's local defaults).
_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


@pytest.fixture(scope="package", autouse=True)
def local_file_listing(spark: SparkSession) -> Iterator[None]:
    before = spark.conf.get(_LISTING_THRESHOLD, None)
    spark.conf.set(_LISTING_THRESHOLD, "100000")
    yield
    if before is None:
        spark.conf.unset(_LISTING_THRESHOLD)
    else:
        spark.conf.set(_LISTING_THRESHOLD, before)
