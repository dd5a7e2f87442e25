"""The project's sessions of a Spark Connect engine (``sc://host:port``), with the token of the
URL, of ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` or of the managed engine's token file
(docs/engines.md). A run that finds no engine listening fails at once, naming the URL.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession

from lakehouse_assets.engine.files import EngineFiles
from lakehouse_assets.errors import ConfigurationError, EngineUnavailableError
from lakehouse_assets.settings import LakehouseSettings

TOKEN_PARAM = "token"
# Backoff 0.1, 0.4, 1.6, then 5 s: 8 retries are about 27 s before a lost engine fails the run.
# An engine on this machine that stops answering has died (its sessions with it): 3 retries,
# about 2 s, not half a minute of waiting for a process that is gone (a killed engine's run
# took 57 s to fail with 8).
ENGINE_RETRIES, LOOPBACK_ENGINE_RETRIES = 8, 3
# How gRPC and pyspark say that the engine is gone (status codes and pyspark's error class).
_CONNECTION_LOSS_SIGNS = ("StatusCode.UNAVAILABLE", "RETRIES_EXCEEDED", "failed to connect to all addresses",
                          "Connection refused", "Socket closed")
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}

# Runs upload no artifacts (the code is installed beside the engine), so their Python worker
# pools can be shared: with isolation every query left a Python daemon behind (docs/engines.md).
# It takes effect when set before the session's first query; set on the server it does not.
RUN_SESSION_CONF = {"spark.sql.artifact.isolation.enabled": "false"}

# The process's shared session of each engine, by URL. pyspark's ``getOrCreate`` returns the
# process's default session whatever URL it is asked for, so a process that talks to two
# engines (a test's own engine beside the suite's) would send one's work to the other.
_SHARED_SESSIONS: dict[str, SparkSession] = {}


@dataclass(frozen=True)
class EngineAddress:
    """A Spark Connect URL taken apart: host, port and its ``;key=value`` parameters."""

    host: str
    port: int
    params: Mapping[str, str]

    @classmethod
    def parse(cls, url: str) -> EngineAddress:
        if not url.startswith("sc://"):
            raise ConfigurationError(f"{url!r} is not a Spark Connect URL: write sc://host:port")
        rest = url[len("sc://"):]
        location, _, param_text = rest.partition("/")
        host, _, port_text = location.rpartition(":")
        if not host or not port_text.isdigit():
            raise ConfigurationError(f"{url!r} names no host and port: write sc://host:port")
        params = dict(part.partition("=")[::2] for part in param_text.split(";") if part)
        return cls(host, int(port_text), params)

    @property
    def is_loopback(self) -> bool:
        return self.host in _LOOPBACK

    def url(self, *, with_token: bool = True) -> str:
        params = {k: v for k, v in self.params.items() if with_token or k != TOKEN_PARAM}
        suffix = "".join(f";{k}={v}" for k, v in params.items())
        return f"sc://{self.host}:{self.port}" + (f"/{suffix}" if suffix else "")

    def with_token(self, token: str) -> EngineAddress:
        # gRPC sends a token without TLS only over "local credentials", which the client uses
        # when the host is written `localhost`; written 127.0.0.1 it insists on TLS.
        host = "localhost" if self.is_loopback else self.host
        return EngineAddress(host, self.port, {**self.params, TOKEN_PARAM: token})


def engine_address(settings: LakehouseSettings) -> EngineAddress:
    """The engine ``settings`` point at, with the token the project's sessions send."""
    if not settings.spark_remote:
        raise ConfigurationError("LAKEHOUSE_SPARK_REMOTE is not set: Spark runs embedded, there is no engine")
    address = EngineAddress.parse(settings.spark_remote)
    if TOKEN_PARAM in address.params or os.environ.get("SPARK_CONNECT_AUTHENTICATE_TOKEN"):
        return address
    token = EngineFiles.of(settings).read_token()
    if token and address.is_loopback and address.port == settings.engine_port:
        return address.with_token(token)
    return address


def connect_session(
    settings: LakehouseSettings, *, conf: Mapping[str, str], new_session: bool
) -> SparkSession:
    """A Spark Connect session of the engine ``settings`` name, with ``conf`` applied where a
    session may change it (the rest, the application's name included, was fixed when the
    engine started)."""
    address = engine_address(settings)
    shown = address.url(with_token=False)
    _check_listening(address, shown)
    url = address.url()
    shared = None if new_session else _SHARED_SESSIONS.get(url)
    try:
        # is_stopped is a Connect session's; the classic session's type pyspark declares lacks it.
        if shared is not None and not shared.is_stopped:  # type: ignore[attr-defined]
            spark = shared
        else:
            spark = SparkSession.builder.remote(url).create()
            if not new_session:
                _SHARED_SESSIONS[url] = spark
        _bound_retries(spark, address)
        modifiable = {key: value for key, value in conf.items() if spark.conf.isModifiable(key)}
    except Exception as exc:  # noqa: BLE001 - gRPC errors have no common base worth naming
        raise EngineUnavailableError(shown, refusal_reason(exc)) from exc
    for key, value in {**modifiable, **RUN_SESSION_CONF}.items():
        spark.conf.set(key, value)
    return spark


def _bound_retries(spark: SparkSession, address: EngineAddress) -> None:
    """Retry an engine that stops answering for about half a minute (one on this machine for
    seconds), then fail: pyspark's default waits at least ten minutes, so a run whose engine
    crashed would hang, not fail."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    retries = LOOPBACK_ENGINE_RETRIES if address.is_loopback else ENGINE_RETRIES
    spark.client.set_retry_policies([DefaultPolicy(max_retries=retries, initial_backoff=100, max_backoff=5000)])


def close_session(spark: SparkSession) -> None:
    """End a run's session: the engine stops its queries and forgets its views. One try: a
    session of an engine that died is gone with it and needs no release."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark.client.set_retry_policies([DefaultPolicy(max_retries=0)])
    with contextlib.suppress(Exception):
        spark.stop()


@contextlib.contextmanager
def engine_errors(settings: LakehouseSettings) -> Iterator[None]:
    """Re-raise a connection to the engine lost mid-run as an :class:`EngineUnavailableError`
    naming the engine and what to do, instead of a gRPC error from deep in pyspark."""
    try:
        yield
    except EngineUnavailableError:
        raise
    except Exception as exc:
        if settings.spark_remote and is_connection_loss(exc):
            shown = EngineAddress.parse(settings.spark_remote).url(with_token=False)
            raise EngineUnavailableError(
                shown, "the connection was lost during the run (the engine stopped or crashed); "
                "`lakehouse engine status` says which, and the next run resumes where this one stopped"
            ) from exc
        raise


def is_connection_loss(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the engine could not be reached."""
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen)
        if any(sign in text for sign in _CONNECTION_LOSS_SIGNS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _check_listening(address: EngineAddress, shown: str) -> None:
    host = "127.0.0.1" if address.host == "localhost" else address.host.strip("[]")
    try:
        with socket.create_connection((host, address.port), timeout=3):
            pass
    except OSError as exc:
        raise EngineUnavailableError(shown, f"nothing listens there ({exc.strerror or exc})") from exc


def refusal_reason(exc: BaseException) -> str:
    """What a failed request to an engine says, in one line."""
    text = str(exc)
    if "UNAUTHENTICATED" in text or "authentication" in text.lower():
        return (
            "it refused this client's token (the managed engine's token is in $LAKEHOUSE_ROOT/_engine/token; "
            "another engine's goes in the URL as sc://host:port/;token=...)"
        )
    first = text.strip().splitlines()[0][:300] if text.strip() else ""
    return first or type(exc).__name__
