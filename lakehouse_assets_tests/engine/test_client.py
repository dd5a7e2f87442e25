"""How a client names an engine and which token it sends: pure rules, no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_assets.engine.client import EngineAddress, engine_address
from lakehouse_assets.engine.files import EngineFiles, write_private
from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.settings import LakehouseSettings


@pytest.fixture(autouse=True)
def _no_token_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)


def _settings(root: Path, remote: str | None, port: int = 15002) -> LakehouseSettings:
    return LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(root), "LAKEHOUSE_SPARK_REMOTE": remote or "",
                                       "LAKEHOUSE_ENGINE_PORT": str(port)})


def _with_token_file(root: Path, token: str = "t0k3n") -> str:
    write_private(EngineFiles(root / "_engine").token, token + "\n")
    return token


@pytest.mark.parametrize(("url", "host", "port", "params"), [
    ("sc://localhost:15002", "localhost", 15002, {}),
    ("sc://localhost:15002/", "localhost", 15002, {}),
    ("sc://127.0.0.1:15003/;token=abc", "127.0.0.1", 15003, {"token": "abc"}),
    ("sc://engine.internal:443/;use_ssl=true;token=a=b", "engine.internal", 443, {"use_ssl": "true", "token": "a=b"}),
    ("sc://[::1]:15002", "[::1]", 15002, {}),
])
def test_urls_are_taken_apart(url: str, host: str, port: int, params: dict[str, str]) -> None:
    address = EngineAddress.parse(url)
    assert (address.host, address.port, dict(address.params)) == (host, port, params)


@pytest.mark.parametrize("url", ["http://localhost:15002", "sc://localhost", "sc://:15002", "sc://localhost:port"])
def test_malformed_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="sc://host:port"):
        EngineAddress.parse(url)


def test_the_shown_url_never_holds_the_token() -> None:
    address = EngineAddress.parse("sc://localhost:15002/;use_ssl=false;token=secret")
    assert address.url(with_token=False) == "sc://localhost:15002/;use_ssl=false"
    assert address.url() == "sc://localhost:15002/;use_ssl=false;token=secret"
    assert EngineAddress.parse("sc://localhost:15002/;token=secret").url(with_token=False) == "sc://localhost:15002"


def test_a_token_on_loopback_is_sent_to_localhost() -> None:
    # gRPC sends a token without TLS only over local credentials, i.e. to the host `localhost`.
    assert EngineAddress.parse("sc://127.0.0.1:15002").with_token("t").url() == "sc://localhost:15002/;token=t"
    assert EngineAddress.parse("sc://remote-host:15002").with_token("t").url() == "sc://remote-host:15002/;token=t"
    assert EngineAddress.parse("sc://localhost:1").is_loopback
    assert not EngineAddress.parse("sc://10.0.0.5:1").is_loopback


def test_the_managed_engine_token_is_read_from_its_file(tmp_path: Path) -> None:
    token = _with_token_file(tmp_path)
    address = engine_address(_settings(tmp_path, "sc://127.0.0.1:15002"))
    assert address.url() == f"sc://localhost:15002/;token={token}"


def test_a_token_in_the_url_wins_over_the_file(tmp_path: Path) -> None:
    _with_token_file(tmp_path)
    assert engine_address(_settings(tmp_path, "sc://localhost:15002/;token=mine")).params["token"] == "mine"


def test_the_token_in_the_environment_wins_over_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_token_file(tmp_path)
    monkeypatch.setenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", "from-env")
    # pyspark's client sends the environment's token itself; the URL gets none.
    assert "token" not in engine_address(_settings(tmp_path, "sc://localhost:15002")).params


@pytest.mark.parametrize(("remote", "engine_port"), [
    ("sc://localhost:15002", 15012),      # another port than the managed engine's
    ("sc://engine.internal:15002", 15002),  # not this machine
])
def test_the_token_file_goes_only_to_the_managed_engine(tmp_path: Path, remote: str, engine_port: int) -> None:
    _with_token_file(tmp_path)
    assert "token" not in engine_address(_settings(tmp_path, remote, engine_port)).params


def test_no_token_file_means_no_token(tmp_path: Path) -> None:
    assert engine_address(_settings(tmp_path, "sc://localhost:15002")).url() == "sc://localhost:15002"


def test_there_is_no_engine_address_without_a_remote(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="LAKEHOUSE_SPARK_REMOTE is not set"):
        engine_address(_settings(tmp_path, None))
