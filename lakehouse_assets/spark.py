"""The one way to build a SparkSession for lakehouse_assets, embedded or on a Spark Connect engine.

Sessions are built on demand, never at import: Dagster imports the definitions in several
processes, and a JVM start costs seconds.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark_conf import REQUIRED_CONF, engine_conf, is_connect_session


def build_spark_session(
    settings: LakehouseSettings,
    *,
    app_name: str = "lakehouse_assets",
    extra_conf: Mapping[str, str] | None = None,
    new_session: bool = False,
) -> SparkSession:
    """Start (or reuse) the process's SparkSession, configured for the lakehouse.

    Local masters get defaults sized for a small machine; ``settings.spark_conf`` and
    ``extra_conf`` override them. Python workers run this interpreter, so they see the same
    packages (pyarrow, deltalake) as the driver.

    With ``settings.spark_remote`` the session is a Spark Connect session of that engine; a
    run asks for ``new_session`` so that nothing it registers (temp views, settings, data
    sources) is seen by another run on the same engine.
    """
    requested = {**settings.spark_conf, **(extra_conf or {})}
    if settings.spark_remote:
        from lakehouse_assets.engine.client import connect_session

        return connect_session(settings, conf={**requested, **REQUIRED_CONF}, new_session=new_session)
    is_local = settings.spark_master.startswith("local")
    if is_local:
        # Spark starts Python workers with PYSPARK_PYTHON, which defaults to the system
        # interpreter, not this virtualenv.
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = SparkSession.getActiveSession() or _running_session()
    if spark is None:
        conf = engine_conf(settings, extra_conf)
        builder = SparkSession.builder.master(settings.spark_master).appName(app_name)
        for key, value in conf.items():
            builder = builder.config(key, value)
        with _jvm_output_to(settings.spark_log):
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
    if not is_connect_session(spark):  # an engine's session started elsewhere has no JVM here
        spark.sparkContext.setLogLevel("WARN")
    return spark


@contextlib.contextmanager
def _jvm_output_to(path: Path | None) -> Iterator[None]:
    """Start the JVM with its standard output and error going to ``path`` (appended), for
    its whole life, instead of this process's: the JVM inherits them when it starts."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with path.open("ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for descriptor, target in zip(saved, (1, 2), strict=True):
            os.dup2(descriptor, target)
            os.close(descriptor)


def _running_session() -> SparkSession | None:
    """The process's session when one runs but is not this thread's active session (a run
    on another thread): the builder would otherwise apply the local defaults to it."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is None:
        return None
    return SparkSession.builder.getOrCreate()
