"""The same code on a real Spark cluster, and its engine killed under a run: a standalone master
and worker on loopback, an engine whose driver uses them, the lakehouse's root on S3-API object
storage (s3proxy on loopback: the storage a cluster's executors share, where a local disk is
theirs alone), and the reference pipeline carried to gold through Dagster runs attached to it.
The first run has its engine SIGKILLed mid-query: it fails by itself naming the engine,
`lakehouse engine start` brings the engine back, and the next run makes every table whole; each
table then equals what the embedded runs of the reference lakehouse (``built``, on a local
disk) made of the same landed files.

The store is reached as a deployment reaches it: the engine and the runs from the environment
that starts them (the AWS variables); the executors from the worker's own environment, which
holds the credentials (``StandaloneCluster(worker_env=...)``), with the endpoint in the
engine's S3A settings. No secret enters Spark's settings.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from lakehouse_assets.reliability.table_reader import read_rows, row_tuples
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.built import BuiltLakehouse
from lakehouse_assets_tests.engine.standalone_cluster import StandaloneCluster
from lakehouse_assets_tests.ports import free_port
from lakehouse_assets_tests.reliability.crash_harness import ENGINE_KILL, ENGINE_LOST_MESSAGE, CrashHarness
from lakehouse_assets_tests.s3_server import S3Server

pytestmark = pytest.mark.slow

SEED = 23
#: The reference lakehouse's landing folders the seeds' tables read.
LANDED = ("recordings", "patients")
# Columns that depend on where and when a run happened, not on what landed.
RUN_DEPENDENT = {"_ingested_at", "_source_file"}
TABLES = ["bronze.recordings", "silver.patients", "silver.recordings_enriched", "silver.recordings_quarantine",
          "gold.daily_patient_avg", "gold.device_counts"]
KILLED_IN = "bronze.recordings"


def _rows(settings: LakehouseSettings, table: str) -> Counter:
    """The table's rows as a multiset, read with delta-rs alone (on the store through the
    lakehouse's store); floats to 9 places, since the cluster sums in another order, and the
    lakehouse root written out of file names."""
    layer, name = table.split(".")
    rows = read_rows(settings.table_path(layer, name))
    columns = [c for c in rows.column_names if c not in RUN_DEPENDENT]
    # Rescued data names its landing file by full path, as Spark spells it: file:/root/... on a
    # local disk, s3a://bucket/prefix/... on the store.
    roots = (settings.root.uri_of(""), f"{settings.root}/")

    def same_anywhere(value: object) -> object:
        if isinstance(value, float):
            return round(value, 9)
        if isinstance(value, str):
            for root in roots:
                value = value.replace(root, "<root>/")
        return value

    return Counter(tuple(map(same_anywhere, row)) for row in row_tuples(rows, columns))


def test_the_reference_pipeline_on_a_standalone_cluster_survives_its_engine_killed_and_equals_an_embedded_run(
        built: BuiltLakehouse, spark_on_s3: S3Server, tmp_path: Path) -> None:
    # The store, reached from this process's Spark too: lakehouse verify's gold check runs there.
    on_s3 = spark_on_s3
    root = f"s3a://{on_s3.bucket(f'cluster-{uuid.uuid4().hex[:12]}')}/lakehouse"
    with StandaloneCluster(tmp_path / "cluster", worker_env=on_s3.environment()) as cluster:
        on_cluster = CrashHarness(tmp_path / "on_cluster", SEED, engine_port=free_port(),
                                  spark_master=cluster.master_url, log=print, root=root)
        on_cluster.start_engine()
        try:
            for folder in LANDED:  # the files the reference lakehouse was built from, onto the store
                for landed in sorted((built.landing / folder).rglob("*")):
                    if landed.is_file():
                        relative = landed.relative_to(built.landing).as_posix()
                        (on_cluster.location / "landing" / relative).write_bytes(landed.read_bytes())
            killed = on_cluster.run_child(ENGINE_KILL, kill_on_line=f"Running the availableNow query of {KILLED_IN}",
                                          checks=False)

            assert killed.engine_killed, f"the run ended before its {KILLED_IN} query started (log {killed.log})"
            assert killed.returncode == 1, f"the run did not fail by itself (exit {killed.returncode}, log {killed.log})"
            assert ENGINE_LOST_MESSAGE in Path(killed.log).read_text(errors="replace")
            assert on_cluster.summary.engine_restart_seconds, "the engine was not started again"
            assert on_cluster.check("the engine kill", pending_ok=True).ok, on_cluster.summary.failures()

            # The tables, not their checks (a check's Spark jobs cost seconds each on a cluster).
            report = on_cluster.clean_run("the run after the engine came back", checks=False)
        finally:
            on_cluster.stop_engine()
        # The work ran on the cluster's executors, not in the engine's driver.
        executors = list((tmp_path / "cluster" / "work").glob("app-*/*/stderr"))
        assert executors, f"no executor of the engine ran on the worker (see {cluster.log('worker')})"

    assert report.ok and on_cluster.summary.ok, on_cluster.summary.failures()
    assert not list((tmp_path / "on_cluster").rglob("_delta_log")), "a table was written on the local disk"
    for table in TABLES:
        assert _rows(on_cluster.settings, table) == _rows(built.settings, table), \
            f"{table} differs between the cluster and embedded runs"
