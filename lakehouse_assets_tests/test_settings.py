"""Settings come from the environment when asked, with errors that say how to fix them."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.settings import (
    DEFAULT_SENSOR_INTERVAL_SECONDS,
    DEFAULT_SPARK_MASTER,
    LakehouseSettings,
)


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = LakehouseSettings.from_env({})
    assert Path(settings.root) == tmp_path.resolve() / "lakehouse_data"
    assert settings.spark_master == DEFAULT_SPARK_MASTER
    assert settings.spark_conf == {}
    assert settings.sensor_interval_seconds == DEFAULT_SENSOR_INTERVAL_SECONDS


def test_every_variable_is_read(tmp_path: Path) -> None:
    settings = LakehouseSettings.from_env({
        "LAKEHOUSE_ROOT": str(tmp_path / "x" / ".." / "lake"),
        "LAKEHOUSE_SPARK_MASTER": "spark://head:7077",
        "LAKEHOUSE_SPARK_CONF": '{"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": 8}',
        "LAKEHOUSE_SENSOR_INTERVAL": "5",
    })
    assert Path(settings.root) == (tmp_path / "lake").resolve() and Path(settings.root).is_absolute()
    assert settings.spark_master == "spark://head:7077"
    assert settings.spark_conf == {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "8"}
    assert settings.sensor_interval_seconds == 5


def test_the_process_environment_is_read_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "first"))
    first = LakehouseSettings.from_env()
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "second"))
    assert (first.root.name, LakehouseSettings.from_env().root.name) == ("first", "second")


def test_empty_values_mean_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": "", "LAKEHOUSE_SPARK_MASTER": "", "LAKEHOUSE_SPARK_CONF": "  "})
    assert settings.root.name == "lakehouse_data"
    assert (settings.spark_master, settings.spark_conf) == (DEFAULT_SPARK_MASTER, {})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LAKEHOUSE_SPARK_CONF": "{spark.driver.memory: 4g}"}, "LAKEHOUSE_SPARK_CONF is not valid JSON"),
        ({"LAKEHOUSE_SPARK_CONF": '["spark.driver.memory"]'}, "LAKEHOUSE_SPARK_CONF must be a JSON object"),
        ({"LAKEHOUSE_SENSOR_INTERVAL": "30s"}, "LAKEHOUSE_SENSOR_INTERVAL must be a whole number of seconds, got '30s'"),
        ({"LAKEHOUSE_SENSOR_INTERVAL": "0"}, "LAKEHOUSE_SENSOR_INTERVAL must be at least 1 second"),
    ],
)
def test_malformed_settings_are_configuration_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        LakehouseSettings.from_env(env)
    assert message in str(caught.value)


@pytest.mark.parametrize("root", ["abfss://c@account.dfs.core.windows.net/x", "gs://bucket", "hdfs:///lake"])
def test_a_root_on_storage_the_lakehouse_cannot_open_is_refused_in_one_line(root: str) -> None:
    # Taken as a relative path, such a root made a folder named "s3a:" and a green run that
    # skipped every table.
    with pytest.raises(ConfigurationError) as caught:
        LakehouseSettings.from_env({"LAKEHOUSE_ROOT": root})
    message = str(caught.value)
    assert f"LAKEHOUSE_ROOT={root!r}" in message and "reads local paths and S3-API object storage" in message
    assert "\n" not in message


@pytest.mark.parametrize("root", ["s3a://bucket/lake", "s3://bucket/lake/", "S3A://bucket/lake"])
def test_a_root_on_s3_api_object_storage_is_named_as_spark_reads_it(root: str) -> None:
    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": root, "AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
    assert (str(settings.root), settings.root.is_local) == ("s3a://bucket/lake", False)
    assert str(settings.table_path("silver", "orders")) == "s3a://bucket/lake/silver/orders"
    assert settings.root.store.endpoint_url == "http://127.0.0.1:9000"


def test_a_file_url_root_is_the_local_folder(tmp_path: Path) -> None:
    assert LakehouseSettings.from_env({"LAKEHOUSE_ROOT": f"file://{tmp_path}/lake"}).root.local("test") == tmp_path.resolve() / "lake"
    assert LakehouseSettings.from_env({"LAKEHOUSE_ROOT": f"file:{tmp_path}/lake"}).root.local("test") == tmp_path.resolve() / "lake"


def test_locations(settings: LakehouseSettings) -> None:
    root = settings.root
    assert settings.table_path("silver", "orders") == root / "silver" / "orders"
    assert settings.landing_path("shop") == root / "landing" / "shop"
    assert settings.checkpoint_path("silver", "orders") == root / "_checkpoints" / "silver" / "orders"
    assert settings.schema_path("bronze", "orders") == root / "_schemas" / "bronze" / "orders"
    # Tables never collide with the machinery's own folders.
    assert settings.table_path("silver", "orders") != settings.checkpoint_path("silver", "orders")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", "../etc", ".hidden", "_checkpoints"])
def test_names_cannot_leave_the_root_or_hide(settings: LakehouseSettings, name: str) -> None:
    for locate in (lambda: Path(settings.table_path(name, "t")), lambda: Path(settings.table_path("silver", name)),
                   lambda: Path(settings.landing_path(name)), lambda: Path(settings.checkpoint_path("silver", name))):
        with pytest.raises(ConfigurationError, match="not a valid table, layer or source name"):
            locate()


def test_the_engine_url_and_port_are_read_and_checked() -> None:
    settings = LakehouseSettings.from_env({"LAKEHOUSE_SPARK_REMOTE": "sc://localhost:15003", "LAKEHOUSE_ENGINE_PORT": "15003"})
    assert (settings.spark_remote, settings.engine_port) == ("sc://localhost:15003", 15003)
    assert LakehouseSettings.from_env({}).spark_remote is None
    with pytest.raises(ConfigurationError, match="LAKEHOUSE_SPARK_REMOTE must be a Spark Connect URL"):
        LakehouseSettings.from_env({"LAKEHOUSE_SPARK_REMOTE": "spark://head:7077"})
    with pytest.raises(ConfigurationError, match="LAKEHOUSE_ENGINE_PORT"):
        LakehouseSettings.from_env({"LAKEHOUSE_ENGINE_PORT": "70000"})


def test_what_belongs_to_one_machine_stays_on_it_when_the_root_is_on_a_store(tmp_path: Path) -> None:
    # A pid, a token or a log names this machine's processes: on a shared store they would
    # mislead every other machine, and the token would be readable by anyone with the bucket.
    on_store = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": "s3a://bucket/team/lake", "XDG_STATE_HOME": str(tmp_path)})
    assert on_store.engine_path() == tmp_path.resolve() / "lakehouse" / "bucket" / "team" / "lake" / "_engine"
    assert on_store.log_path("spark.log") == tmp_path.resolve() / "lakehouse" / "bucket" / "team" / "lake" / "_logs" / "spark.log"
    local = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path / "lake"), "XDG_STATE_HOME": str(tmp_path)})
    assert local.engine_path() == tmp_path.resolve() / "lake" / "_engine"


def test_the_resource_takes_its_root_as_the_environment_does() -> None:
    from lakehouse_assets.resource import LakehouseResource

    assert str(LakehouseResource(root="s3://bucket/lake").settings().root) == "s3a://bucket/lake"
    with pytest.raises(ConfigurationError, match=r"LakehouseResource\(root\)='gs://bucket/lake'"):
        LakehouseResource(root="gs://bucket/lake").settings()
