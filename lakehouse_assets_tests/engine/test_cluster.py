"""The same code on a real Spark cluster: a standalone master and worker on loopback, an engine
whose driver uses them, and the reference pipeline carried to gold through Dagster; every
table equals what an embedded run made of the same landed files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lakehouse_assets.reliability.delta_files import read_rows, row_tuples
from lakehouse_assets_tests.engine.standalone_cluster import StandaloneCluster
from lakehouse_assets_tests.ports import free_port
from lakehouse_assets_tests.reliability.crash_harness import CrashHarness

pytestmark = pytest.mark.slow

SEED = 23
# Columns that depend on where and when a run happened, not on what landed.
RUN_DEPENDENT = {"_ingested_at", "_source_file"}
TABLES = ["bronze.recordings", "silver.patients", "silver.recordings_enriched", "silver.recordings_quarantine",
          "gold.daily_patient_avg", "gold.device_counts"]



def _rows(harness: CrashHarness, table: str) -> Counter:
    """The table's rows as a multiset, read with delta-rs alone; floats to 9 places, since
    the cluster sums in another order, and the lakehouse root written out of file names."""
    layer, name = table.split(".")
    rows = read_rows(harness.settings.table_path(layer, name))
    columns = [c for c in rows.column_names if c not in RUN_DEPENDENT]
    root = str(harness.root)  # rescued data names its landing file by full path

    def same_anywhere(value: object) -> object:
        if isinstance(value, float):
            return round(value, 9)
        return value.replace(root, "<root>") if isinstance(value, str) else value

    return Counter(tuple(map(same_anywhere, row)) for row in row_tuples(rows, columns))


def test_the_reference_pipeline_on_a_standalone_cluster_equals_the_embedded_run(tmp_path: Path) -> None:
    embedded = CrashHarness(tmp_path / "embedded", SEED)
    embedded.land_some(files=3)
    assert embedded.clean_run("embedded run").ok, embedded.summary.failures()

    with StandaloneCluster(tmp_path / "cluster") as cluster:
        on_cluster = CrashHarness(tmp_path / "on_cluster", SEED, engine_port=free_port(),
                                  spark_master=cluster.master_url)
        on_cluster.start_engine()
        try:
            on_cluster.land_some(files=3)
            report = on_cluster.clean_run("run on the cluster")
        finally:
            on_cluster.stop_engine()
        # The work ran on the cluster's executor, not in the engine's driver.
        executors = list((tmp_path / "cluster" / "work").glob("app-*/*/stderr"))
        assert executors, f"no executor of the engine ran on the worker (see {cluster.log('worker')})"

    assert report.ok and on_cluster.summary.ok, on_cluster.summary.failures()
    for table in TABLES:
        assert _rows(on_cluster, table) == _rows(embedded, table), f"{table} differs between the cluster and embedded runs"
