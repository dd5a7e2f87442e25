"""The lakehouse as a Dagster resource: the one place that knows where it is and how it is reached.

:class:`LakehouseResource` holds, as typed config, the lakehouse's root (a folder, or a prefix
on S3-API object storage), the Spark engine to attach to (a Spark Connect URL; none: Spark
runs embedded), Spark's settings, and how the store is reached (:class:`LocalStorage` or
:class:`S3Storage`, told apart by ``provider``, as dagster-deltalake's resource does). It owns
the lakehouse's table store (:class:`~lakehouse_assets.storage.DeltaTableStore`, built here and
nowhere else) and the run's SparkSession, started on first use (never at import, never per
step). The IO manager, sensors, checks, jobs and the ``lakehouse`` command receive it; only the
definitions and the command's entry build it, from the environment
(:meth:`LakehouseResource.from_settings`).

On a Spark Connect engine each run gets a session of its own, released when the run ends (its
streaming queries stop with it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

import dagster as dg
from pydantic import Field, PrivateAttr
from pyspark.sql import SparkSession

from lakehouse_assets.location import ObjectStore
from lakehouse_assets.settings import (
    DEFAULT_DELTA_JARS,
    DEFAULT_ENGINE_PORT,
    DEFAULT_ROOT,
    DEFAULT_SENSOR_INTERVAL_SECONDS,
    DEFAULT_SPARK_MASTER,
    DEFAULT_STATE_HOME,
    LakehouseSettings,
    lakehouse_root,
)
from lakehouse_assets.spark import build_spark_session
from lakehouse_assets.spark_conf import is_connect_session
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.storage.store_probe import probe_store
from lakehouse_assets.tables import LakehouseTables
from lakehouse_assets.tables.catalog import register_tables

#: The resource key the lakehouse is known by to assets, checks, sensors and jobs.
LAKEHOUSE_RESOURCE = "lakehouse"


class LocalStorage(dg.Config):
    """Tables on a local disk (or a mounted file system): nothing to configure."""

    provider: Literal["local"] = "local"


class S3Storage(dg.Config):
    """Tables on S3-API object storage (a root ``s3a://bucket/prefix``). Credentials are not
    held here: Spark's S3A and delta-rs read ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` (or
    a profile, or an instance role) themselves, so no secret is copied into Spark's settings,
    which its UI and logs show."""

    provider: Literal["s3"] = "s3"
    endpoint_url: str | None = Field(
        default=None, description="The store's endpoint for a store other than AWS (http(s)://host:port); "
        "reached with path-style addresses")
    region: str | None = Field(default=None, description="The store's region")


#: How the lakehouse's store is reached: a local disk or S3-API object storage.
StorageOptions = Annotated[LocalStorage | S3Storage, Field(discriminator="provider")]


class LakehouseResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The lakehouse a run writes and reads: its root, its Spark, its store."""

    root: str = Field(default=DEFAULT_ROOT, description="The lakehouse's folder, or s3a://bucket/prefix")
    engine_url: str | None = Field(
        default=None, description="A Spark Connect engine's URL (sc://host:port); none runs Spark embedded")
    spark_master: str = Field(default=DEFAULT_SPARK_MASTER, description="The master of an embedded Spark")
    spark_config: dict[str, str] = Field(default_factory=dict, description="Spark settings, over the defaults")
    storage: StorageOptions = Field(default_factory=LocalStorage, description="How the store is reached")
    delta_jars: str = Field(default=str(DEFAULT_DELTA_JARS), description="The folder of Delta Lake's jars")
    engine_port: int = Field(default=DEFAULT_ENGINE_PORT, description="The port the managed engine listens on")
    state_home: str = Field(default=str(DEFAULT_STATE_HOME),
                            description="Where this machine keeps its own files of a lakehouse on object storage")
    sensor_interval_seconds: int = Field(default=DEFAULT_SENSOR_INTERVAL_SECONDS,
                                         description="How often the landing sensors look")
    asset_packages: list[str] = Field(default_factory=list, description="Packages of table assets loaded beside")
    pipelines: list[str] = Field(default_factory=list, description="Lakeflow pipeline folders loaded as assets")
    dagster_home: str | None = Field(default=None, description="Dagster's instance folder")
    spark_log: str | None = Field(default=None, description="Where an embedded driver's JVM writes its own output "
                                  "(none: this process's terminal)")

    _settings: LakehouseSettings | None = PrivateAttr(default=None)
    _store: DeltaTableStore | None = PrivateAttr(default=None)
    _spark_session: SparkSession | None = PrivateAttr(default=None)
    _run_id: str | None = PrivateAttr(default=None)

    @classmethod
    def from_settings(cls, settings: LakehouseSettings) -> LakehouseResource:
        """The resource of the lakehouse ``settings`` describe (as the environment gives them:
        :meth:`LakehouseSettings.from_env`)."""
        store = settings.object_store
        storage: LocalStorage | S3Storage = (LocalStorage() if settings.root.is_local
                                             else S3Storage(endpoint_url=store.endpoint_url, region=store.region))
        return cls(root=str(settings.root), engine_url=settings.spark_remote, spark_master=settings.spark_master,
                   spark_config=dict(settings.spark_conf), storage=storage, delta_jars=str(settings.delta_jars),
                   engine_port=settings.engine_port, state_home=str(settings.state_home),
                   sensor_interval_seconds=settings.sensor_interval_seconds,
                   asset_packages=list(settings.asset_packages), pipelines=[str(p) for p in settings.pipelines],
                   dagster_home=str(settings.dagster_home) if settings.dagster_home else None,
                   spark_log=str(settings.spark_log) if settings.spark_log else None)

    def settings(self) -> LakehouseSettings:
        """Where the lakehouse is and how Spark is reached, resolved once."""
        if self._settings is None:
            object_store = (ObjectStore(self.storage.endpoint_url, self.storage.region)
                            if isinstance(self.storage, S3Storage) else ObjectStore())
            # Every field is config: Dagster builds the resource again from its config in a run.
            self._settings = LakehouseSettings(
                root=lakehouse_root(self.root, given_as="LakehouseResource(root)", store=object_store),
                spark_remote=self.engine_url or None, spark_master=self.spark_master,
                spark_conf=dict(self.spark_config), delta_jars=Path(self.delta_jars), object_store=object_store,
                engine_port=self.engine_port, state_home=Path(self.state_home),
                sensor_interval_seconds=self.sensor_interval_seconds, asset_packages=tuple(self.asset_packages),
                pipelines=tuple(Path(p) for p in self.pipelines),
                dagster_home=Path(self.dagster_home) if self.dagster_home else None,
                spark_log=Path(self.spark_log) if self.spark_log else None)
        return self._settings

    def store(self) -> DeltaTableStore:
        """The lakehouse's tables, read and written through Delta Lake's connector (and read by
        delta-rs where no Spark is needed). A root on object storage is probed for what the
        lakehouse needs of its store first, once."""
        if self._store is None:
            settings = self.settings()
            probe_store(settings.root)
            self._store = DeltaTableStore(settings.object_store)
        return self._store

    @property
    def spark_session(self) -> SparkSession:
        """The run's SparkSession, started on first use, its tables registered by name."""
        if self._spark_session is None:
            settings = self.settings()
            if settings.spark_remote:
                self._spark_session = _run_sessions.get(
                    (self._run_id, settings.spark_remote), lambda: build_spark_session(settings, new_session=True))
            else:
                self._spark_session = build_spark_session(settings)
            register_tables(self._spark_session, settings, self.store())
        return self._spark_session

    @property
    def tables(self) -> LakehouseTables:
        """The lakehouse's tables by name in this run's session: ``lakehouse.tables.sql("SELECT
        ... FROM STREAM(bronze.recordings)")``, ``lakehouse.tables.table("silver.recordings_enriched")``."""
        return LakehouseTables(self.spark_session, self.settings(), self.store())

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._run_id = context.run.run_id if context.run else None

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Release the run's own Connect session (its streaming queries stop with it); an
        embedded session lives as long as the process (the next run in a test process reuses
        its JVM)."""
        if self._spark_session is not None and is_connect_session(self._spark_session):
            _run_sessions.release((self._run_id, self.settings().spark_remote))
            self._spark_session = None


class _RunSessions:
    """One Connect session per Dagster run and engine in this process: the resource is
    initialised once for each resource that uses it (the IO managers hold it too), and a stream
    from one session cannot be joined with a table read through another. Keyed by the engine
    too: outside a run (no run id), two lakehouses on two engines must not share a session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[tuple[str | None, str | None], SparkSession] = {}

    def get(self, key: tuple[str | None, str | None], build: Callable[[], SparkSession]) -> SparkSession:
        with self._lock:
            if key not in self._sessions:
                self._sessions[key] = build()
            return self._sessions[key]

    def release(self, key: tuple[str | None, str | None]) -> None:
        with self._lock:
            session = self._sessions.pop(key, None)
        if session is not None:
            from lakehouse_assets.engine.client import close_session

            close_session(session)


_run_sessions = _RunSessions()


__all__ = ["LAKEHOUSE_RESOURCE", "LakehouseResource", "LocalStorage", "S3Storage", "StorageOptions"]

