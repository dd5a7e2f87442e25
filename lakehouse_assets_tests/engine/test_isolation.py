"""Runs sharing one Spark Connect engine do not see or harm each other.

Each Dagster run gets a Connect session of its own (``LakehouseResource``), so what one run
registers (temp views, settings, data sources) is invisible to another, and two runs on
disjoint tables proceed at the same time. Runs in the Connect pass of ``make test``
(``scripts/test_on_engine.sh``), where every session of this process is a Connect session.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import dagster as dg
import pytest

from lakehouse_assets.engine.client import EngineAddress
from lakehouse_assets.reliability.flows import project_flows
from lakehouse_assets.reliability.landed_once import check_landed_once
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import land
from lakehouse_assets.spark import build_spark_session
from lakehouse_assets.spark_conf import is_connect_session
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialize

pytestmark = pytest.mark.skipif(not os.environ.get("LAKEHOUSE_SPARK_REMOTE"),
                                reason="needs a Spark Connect engine: the Connect pass of make test")

LANDING_OPTIONS = dict(records_per_file=200, bad_rate=0.0, seed=41, files_per_year=365)


def test_a_run_session_sees_nothing_another_run_registered(spark, settings):
    # As a run reads them: the temporary root, and the engine from LAKEHOUSE_SPARK_REMOTE.
    run_settings = LakehouseSettings.from_env()
    first, second = (build_spark_session(run_settings, new_session=True) for _ in range(2))
    try:
        assert is_connect_session(first) and is_connect_session(second)
        first.range(3).createOrReplaceTempView("only_in_first")
        first.conf.set("spark.sql.shuffle.partitions", "7")
        first.udf.register("only_in_first_fn", lambda x: x, "long")

        assert first.catalog.tableExists("only_in_first")
        assert not second.catalog.tableExists("only_in_first")
        assert second.conf.get("spark.sql.shuffle.partitions") != "7"
        assert first.catalog.functionExists("only_in_first_fn")
        assert not second.catalog.functionExists("only_in_first_fn")
    finally:
        first.stop()
        second.stop()


def test_a_session_asked_of_another_engine_is_that_engines(spark, settings):
    # A second engine at another address: the same engine behind a loopback relay, which
    # counts what passes through it. The process's shared session must not answer for it.
    address = EngineAddress.parse(os.environ["LAKEHOUSE_SPARK_REMOTE"])
    with _relay_to(address.port) as (port, relayed):
        other_url = os.environ["LAKEHOUSE_SPARK_REMOTE"].replace(f":{address.port}/", f":{port}/")
        other = build_spark_session(replace(settings, spark_remote=other_url))
        try:
            assert other is not spark
            assert other.range(5).count() == 5
            assert relayed, "the session asked of the other address never used it"
            assert build_spark_session(replace(settings, spark_remote=other_url)) is other
        finally:
            other.stop()
    assert build_spark_session(settings) is spark


@contextlib.contextmanager
def _relay_to(target_port: int) -> Iterator[tuple[int, list[int]]]:
    """A loopback port relaying every connection to ``target_port``; yields the port and a list
    of the byte counts relayed (empty while nothing came through)."""
    relayed: list[int] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                relayed.append(len(chunk))
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                upstream = socket.create_connection(("127.0.0.1", target_port))
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=pump, args=(source, sink), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1], relayed
    finally:
        listener.close()


@pytest.mark.slow
def test_two_runs_on_disjoint_tables_proceed_at_once(spark, settings):
    landed = land(settings.root / "landing", files=4, **LANDING_OPTIONS)
    start = threading.Barrier(2)

    def run(selection: str) -> tuple[float, float]:
        with dg.DagsterInstance.ephemeral() as instance:  # closed in the thread that opened it
            start.wait()
            result = materialize(selection, instance=instance)
            return _step_span(instance, result.dagster_run.run_id)

    with ThreadPoolExecutor(2) as pool:
        bronze, patients = (f.result() for f in [pool.submit(run, "bronze/recordings"),
                                                  pool.submit(run, "silver/patients")])

    # Both steps were running at one moment: neither waited for the other's session or table.
    (bronze_start, bronze_end), (patients_start, patients_end) = bronze, patients
    assert bronze_start < patients_end and patients_start < bronze_end, "the two runs ran one after the other"
    # And each wrote what it should, whole.
    assert check_landed_once(settings, project_flows()).ok
    patients_in_csv = len(landed.patients_path.read_text().splitlines()) - 1  # less the header
    assert len(delta_rows(settings, "silver", "patients", ["mrn"])) == patients_in_csv


def _step_span(instance: dg.DagsterInstance, run_id: str) -> tuple[float, float]:
    """When the run's one step started and ended (its event log's wall-clock timestamps)."""
    entries = instance.all_logs(run_id)
    started = min(e.timestamp for e in entries if e.dagster_event_type == dg.DagsterEventType.STEP_START)
    ended = max(e.timestamp for e in entries if e.dagster_event_type == dg.DagsterEventType.STEP_SUCCESS)
    return started, ended
