"""The one way to build a SparkSession for lakehouse_assets, embedded or on a Spark Connect engine.

Sessions are built on demand, never at import: Dagster imports the definitions in several
processes, and a JVM start costs seconds. With ``LAKEHOUSE_SPARK_REMOTE`` set, every session is
a Spark Connect session of that engine (:mod:`lakehouse_assets.engine`); unset, Spark runs
embedded in this process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field, PrivateAttr
from pyspark.sql import SparkSession

from lakehouse_assets.settings import LakehouseSettings, lakehouse_root
from lakehouse_assets.spark_conf import REQUIRED_CONF, engine_conf, is_connect_session
from lakehouse_assets.storage import DeltaTableStore, lakehouse_store
from lakehouse_assets.tables import LakehouseTables
from lakehouse_assets.tables.catalog import register_tables


def build_spark_session(
    settings: LakehouseSettings | None = None,
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
    settings = settings or LakehouseSettings.from_env()
    if settings.spark_remote:
        from lakehouse_assets.engine.client import connect_session

        requested = {**settings.spark_conf, **(extra_conf or {})}
        return connect_session(settings, conf={**requested, **REQUIRED_CONF}, new_session=new_session)
    is_local = settings.spark_master.startswith("local")
    if is_local:
        # Spark starts Python workers with PYSPARK_PYTHON, which defaults to the system
        # interpreter, not this virtualenv.
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    requested = {**settings.spark_conf, **(extra_conf or {})}
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


class SparkResource(LazyPySparkResource):
    """The lakehouse as a run sees it: where it is, its tables' store, and the run's
    SparkSession, started on first use (never at import, never per step).

    The IO managers, checks, sensors and jobs ask it for :meth:`settings` and :meth:`store`;
    nothing under them reads the environment. ``root``, ``master``, ``remote`` and
    ``spark_config`` override ``LAKEHOUSE_ROOT``, ``LAKEHOUSE_SPARK_MASTER``,
    ``LAKEHOUSE_SPARK_REMOTE`` and ``LAKEHOUSE_SPARK_CONF``; left empty, the environment
    decides, when the resource is used (so a test or a deployment may set it after the
    definitions load). On a Spark Connect engine each run gets a session of its own, released
    when the run ends (its streaming queries stop with it).
    """

    root: str | None = Field(default=None, description="The lakehouse's folder; default LAKEHOUSE_ROOT")

    master: str | None = Field(default=None, description="Spark master URL; default LAKEHOUSE_SPARK_MASTER or local[2]")
    remote: str | None = Field(
        default=None,
        description="Spark Connect URL of an engine (sc://host:port); default LAKEHOUSE_SPARK_REMOTE, "
        "unset runs Spark embedded",
    )
    spark_config: dict[str, Any] = Field(default_factory=dict, description="Extra Spark settings")
    _run_id: str | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._run_id = context.run.run_id if context.run else None

    def settings(self) -> LakehouseSettings:
        """The environment's settings with this resource's overrides."""
        settings = LakehouseSettings.from_env()
        if self.root:
            settings = replace(settings, root=lakehouse_root(self.root, given_as="SparkResource(root)",
                                                              store=settings.object_store))
        if self.master:
            settings = replace(settings, spark_master=self.master)
        if self.remote:
            settings = replace(settings, spark_remote=self.remote)
        return settings

    def store(self) -> DeltaTableStore:
        """The lakehouse's tables, read and written through Delta Lake's connector (and read
        by delta-rs where no Spark is needed)."""
        return lakehouse_store(self.settings())

    @property
    def tables(self) -> LakehouseTables:
        """The lakehouse's tables by name in this run's session: ``spark.tables.sql("SELECT ...
        FROM STREAM(bronze.recordings)")``, ``spark.tables.table("silver.recordings_enriched")``."""
        return LakehouseTables(self.spark_session, self.settings())

    def _init_session(self) -> None:
        if self._spark_session is None:
            settings = self.settings()
            extra_conf = {k: str(v) for k, v in self.spark_config.items()}
            if settings.spark_remote:
                self._spark_session = _run_sessions.get(
                    self._run_id, lambda: build_spark_session(settings, extra_conf=extra_conf, new_session=True)
                )
            else:
                self._spark_session = build_spark_session(settings, extra_conf=extra_conf)
            register_tables(self._spark_session, settings)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Release the run's own Connect session (its streaming queries stop with it); an
        embedded session lives as long as the process (the next run in a test process reuses
        its JVM)."""
        if self._spark_session is not None and is_connect_session(self._spark_session):
            _run_sessions.release(self._run_id)
            self._spark_session = None


class _RunSessions:
    """One Connect session per Dagster run in this process: the resource is initialised once
    for each resource that uses it (the IO managers hold it too), and a stream from one
    session cannot be joined with a table read through another."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str | None, SparkSession] = {}

    def get(self, run_id: str | None, build: Callable[[], SparkSession]) -> SparkSession:
        with self._lock:
            if run_id not in self._sessions:
                self._sessions[run_id] = build()
            return self._sessions[run_id]

    def release(self, run_id: str | None) -> None:
        with self._lock:
            session = self._sessions.pop(run_id, None)
        if session is not None:
            from lakehouse_assets.engine.client import close_session

            close_session(session)


_run_sessions = _RunSessions()
