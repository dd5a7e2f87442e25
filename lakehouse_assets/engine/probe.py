"""Asking an engine whether it answers: an authenticated request over its own Connect
session (and, on start, a first one-row job), bounded in time, with the reason when not."""

from __future__ import annotations

import contextlib
import socket
import threading

from lakehouse_assets.engine.client import EngineAddress, refusal_reason


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def probe(port: int, token: str | None, *, timeout_seconds: float, warm_up: bool = False) -> str | None:
    """None when the engine on ``port`` serves an authenticated request (and, with
    ``warm_up``, runs a one-row job); else what went wrong."""
    if not listening(port):
        return f"nothing listens on port {port}"
    if not token:
        return "its token file is missing"
    outcome: list[str | None] = []
    worker = threading.Thread(target=lambda: outcome.append(_authenticated_request(port, token, warm_up)),
                              name="lakehouse-engine-probe", daemon=True)
    worker.start()
    worker.join(timeout_seconds)
    if not outcome:
        return f"no answer within {timeout_seconds:.0f} s"
    return outcome[0]


def _authenticated_request(port: int, token: str, warm_up: bool) -> str | None:
    # A Connect session object of its own, not SparkSession.builder.remote(): the builder
    # would switch this whole process into Connect mode and make this its default session.
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    url = EngineAddress("localhost", port, {}).with_token(token).url()
    spark = None
    try:
        spark = ConnectSession(connection=url)
        # An engine that is still starting refuses connections: fail fast, the caller retries.
        spark.client.set_retry_policies([DefaultPolicy(max_retries=2, initial_backoff=100, max_backoff=500)])
        spark.version  # noqa: B018 - an authenticated round trip
        if warm_up:
            spark.range(1).count()  # the first job pays for loading Spark's classes; not a run
        return None
    except Exception as exc:  # noqa: BLE001 - gRPC errors have no common base worth naming
        if spark is not None:
            spark.release_session_on_close = False  # nothing to release; do not retry to say so
        return refusal_reason(exc)
    finally:
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()

