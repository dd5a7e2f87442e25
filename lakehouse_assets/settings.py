"""Where the lakehouse lives and how Spark is reached, read from the environment when asked.

Nothing here is read at import time: Dagster imports definitions in several processes, and
tests point ``LAKEHOUSE_ROOT`` at a temporary folder per session.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.location import Location, ObjectStore, locate

DEFAULT_ROOT = "./lakehouse_data"
DEFAULT_SPARK_MASTER = "local[2]"
# Spark Connect's own default port; `lakehouse engine start` listens there unless told otherwise.
DEFAULT_ENGINE_PORT = 15002
# Listing a local landing folder is cheap; a 5 s tick (2.5 s waited at the median) keeps
# land -> gold within seconds on a warm engine, where a run itself takes a few seconds.
DEFAULT_SENSOR_INTERVAL_SECONDS = 5

# Delta Lake's JVM jars, resolved by `make install` (scripts/install_jars.sh) beside their
# committed SHA-256 sums.
PROJECT_JARS = Path(__file__).resolve().parents[1] / "jars"
DEFAULT_DELTA_JARS = PROJECT_JARS / "lib"
DELTA_JAR_SUMS = PROJECT_JARS / "SHA256SUMS"

# Folders under the root that are not tables: they hold the machinery's own state.
CHECKPOINTS_DIR = "_checkpoints"
SCHEMAS_DIR = "_schemas"
ENGINE_DIR = "_engine"
DEFAULT_STATE_HOME = Path("~/.local/state/lakehouse").expanduser()
LOGS_DIR = "_logs"
LANDING_DIR = "landing"
# Under a table's checkpoint: one checkpoint per append flow, for a table several flows fill.
FLOWS_DIR = "flows"


@dataclass(frozen=True)
class LakehouseSettings:
    """The lakehouse's locations and Spark connection, resolved to absolute paths.

    ``spark_remote`` set (a ``sc://host:port`` URL) makes every session a Spark Connect
    session of that engine; unset, Spark runs embedded on ``spark_master``.
    """

    root: Location
    spark_master: str = DEFAULT_SPARK_MASTER
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    sensor_interval_seconds: int = DEFAULT_SENSOR_INTERVAL_SECONDS
    spark_remote: str | None = None
    engine_port: int = DEFAULT_ENGINE_PORT
    #: Where Delta Lake's jars are (``LAKEHOUSE_DELTA_JARS``; an air-gapped site supplies them there).
    delta_jars: Path = DEFAULT_DELTA_JARS
    #: Python packages of table assets loaded beside the project's own (``LAKEHOUSE_ASSET_PACKAGES``).
    asset_packages: tuple[str, ...] = ()
    #: Spark Declarative Pipelines / Lakeflow project folders loaded as assets (``LAKEHOUSE_PIPELINES``).
    pipelines: tuple[Path, ...] = ()
    #: Where an embedded driver's JVM writes its own output (Spark's log lines, the JVM's
    #: warnings); None: this process's terminal. The `lakehouse` command sets it.
    spark_log: Path | None = None
    #: Dagster's instance folder (``DAGSTER_HOME``): its runs' records say how far each table's
    #: query has read, which ``lakehouse vacuum`` asks; None: unset.
    dagster_home: Path | None = None
    #: How S3-API object storage is reached (the AWS variables).
    object_store: ObjectStore = field(default_factory=ObjectStore)
    #: Where this machine keeps its own files of a lakehouse on object storage
    #: (``$XDG_STATE_HOME/lakehouse``, by default ``~/.local/state/lakehouse``).
    state_home: Path = DEFAULT_STATE_HOME

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LakehouseSettings:
        """Read the ``LAKEHOUSE_*`` variables, Dagster's ``DAGSTER_HOME``, ``XDG_STATE_HOME`` and the
        AWS variables of :class:`ObjectStore` (docs/configuration.md lists them)."""
        env = os.environ if environ is None else environ
        store = ObjectStore.from_env(env)
        root = lakehouse_root(env.get("LAKEHOUSE_ROOT") or DEFAULT_ROOT, store=store)
        conf_text = env.get("LAKEHOUSE_SPARK_CONF", "").strip()
        try:
            spark_conf = json.loads(conf_text) if conf_text else {}
        except json.JSONDecodeError as exc:
            raise ConfigurationError(
                f"LAKEHOUSE_SPARK_CONF is not valid JSON ({exc.msg}); "
                'give an object such as {"spark.driver.memory": "4g"}'
            ) from exc
        if not isinstance(spark_conf, dict):
            raise ConfigurationError("LAKEHOUSE_SPARK_CONF must be a JSON object of Spark settings")
        interval_text = env.get("LAKEHOUSE_SENSOR_INTERVAL", str(DEFAULT_SENSOR_INTERVAL_SECONDS))
        try:
            interval = int(interval_text)
        except ValueError as exc:
            raise ConfigurationError(
                f"LAKEHOUSE_SENSOR_INTERVAL must be a whole number of seconds, got {interval_text!r}"
            ) from exc
        if interval < 1:
            raise ConfigurationError("LAKEHOUSE_SENSOR_INTERVAL must be at least 1 second")
        remote = (env.get("LAKEHOUSE_SPARK_REMOTE") or "").strip() or None
        if remote is not None and not remote.startswith("sc://"):
            raise ConfigurationError(
                f"LAKEHOUSE_SPARK_REMOTE must be a Spark Connect URL such as sc://localhost:{DEFAULT_ENGINE_PORT}, "
                f"got {remote!r}; unset it to run Spark embedded"
            )
        port_text = env.get("LAKEHOUSE_ENGINE_PORT", str(DEFAULT_ENGINE_PORT))
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ConfigurationError(f"LAKEHOUSE_ENGINE_PORT must be a TCP port number, got {port_text!r}")
        return cls(
            root=root,
            spark_master=env.get("LAKEHOUSE_SPARK_MASTER") or DEFAULT_SPARK_MASTER,
            spark_conf={str(k): str(v) for k, v in spark_conf.items()},
            sensor_interval_seconds=interval,
            spark_remote=remote,
            engine_port=int(port_text),
            delta_jars=Path(env.get("LAKEHOUSE_DELTA_JARS") or DEFAULT_DELTA_JARS).expanduser().resolve(),
            asset_packages=_package_names(env.get("LAKEHOUSE_ASSET_PACKAGES", "")),
            pipelines=tuple(Path(folder).expanduser().resolve()
                            for folder in env.get("LAKEHOUSE_PIPELINES", "").split(os.pathsep) if folder.strip()),
            dagster_home=Path(env["DAGSTER_HOME"]).expanduser().resolve() if env.get("DAGSTER_HOME") else None,
            object_store=store,
            state_home=(Path(env["XDG_STATE_HOME"]).expanduser().resolve() / "lakehouse"
                        if env.get("XDG_STATE_HOME") else DEFAULT_STATE_HOME),
        )

    def layer_path(self, layer: str) -> Location:
        """The folder of a layer's tables: ``$LAKEHOUSE_ROOT/<layer>``."""
        return self.root / _safe_part(layer)

    def table_path(self, layer: str, name: str) -> Location:
        """The Delta table of ``layer.name``: ``$LAKEHOUSE_ROOT/<layer>/<name>``."""
        return self.layer_path(layer) / _safe_part(name)

    def landing_path(self, source: str) -> Location:
        """The folder files of ``source`` land in: ``$LAKEHOUSE_ROOT/landing/<source>``."""
        return self.root / LANDING_DIR / _safe_part(source)

    def checkpoint_path(self, layer: str, name: str) -> Location:
        """The streaming checkpoint of the query that writes ``layer.name``."""
        return self.root / CHECKPOINTS_DIR / _safe_part(layer) / _safe_part(name)

    def machine_path(self) -> Path:
        """Where this machine keeps its own files of the lakehouse (a process's pid, the engine's
        token, logs), which mean nothing on another machine: the root itself on a local disk;
        for a root on object storage, ``<state_home>/<bucket>/<prefix>``."""
        if self.root.is_local:
            return Path(self.root.uri)
        return self.state_home / self.root.path

    def engine_path(self) -> Path:
        """Where the managed Spark Connect engine keeps its pid, token, settings and log:
        ``_engine`` under :meth:`machine_path`."""
        return self.machine_path() / ENGINE_DIR

    def log_path(self, name: str) -> Path:
        """A log file of the lakehouse's own: ``_logs/<name>`` under :meth:`machine_path`."""
        return self.machine_path() / LOGS_DIR / _safe_part(name)

    def schema_path(self, layer: str, name: str) -> Location:
        """Where ingestion stores the inferred schema of ``layer.name``."""
        return self.root / SCHEMAS_DIR / _safe_part(layer) / _safe_part(name)


def class_archive_settings() -> LakehouseSettings:
    """The settings Spark's classes are archived with at install (``make install``): the Delta
    jars the environment names, and a temporary root (the archive holds no table)."""
    return LakehouseSettings.from_env({"LAKEHOUSE_ROOT": tempfile.gettempdir(),
                                       "LAKEHOUSE_DELTA_JARS": os.environ.get("LAKEHOUSE_DELTA_JARS", "")})


def lakehouse_root(text: str, given_as: str = "LAKEHOUSE_ROOT", store: ObjectStore | None = None) -> Location:
    """The lakehouse's root as ``given_as`` (the variable, or a resource's setting) gives it: a
    local folder (a path or a ``file://`` URL, made absolute) or a prefix on S3-API object
    storage (``s3a://bucket/prefix``; ``s3://`` is read as ``s3a://``), reached through
    ``store``. Any other scheme is refused in one line: taken as a relative path, such a root
    would make a new folder named after the URL and find every table empty."""
    given = text.strip()
    try:
        root = locate(os.path.expanduser(given), store)
    except ConfigurationError as refused:
        raise ConfigurationError(f"{given_as}={given!r}: {str(refused).removeprefix(given + ': ')}") from None
    if root.is_local:
        return Location(str(Path(root.uri).expanduser().resolve()), root.store)
    return root


def _package_names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    invalid = [name for name in names if not all(part.isidentifier() for part in name.split("."))]
    if invalid:
        raise ConfigurationError(
            f"LAKEHOUSE_ASSET_PACKAGES must name importable Python packages separated by commas "
            f"(such as my_project.assets), got {', '.join(map(repr, invalid))}")
    return names


def _safe_part(part: str) -> str:
    """A path segment that cannot climb out of the root or hide as a dot file."""
    if not part or part in {".", ".."} or "/" in part or "\\" in part or part.startswith((".", "_")):
        raise ConfigurationError(
            f"{part!r} is not a valid table, layer or source name: use letters, digits and "
            "underscores, not starting with '_' or '.'"
        )
    return part
