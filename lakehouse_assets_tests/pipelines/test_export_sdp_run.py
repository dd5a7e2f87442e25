"""`lakehouse export-sdp` run for real: the reference data landed and materialized through
Dagster, the project exported, the export run by pyspark's own ``spark-pipelines run`` (its own
Spark, Delta Lake's jars on its command line), and every table it wrote read back with delta-rs
and compared with the lakehouse's, row for row."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable

from lakehouse_assets.assets.discovery import project_packages
from lakehouse_assets.definitions import project_definitions
from lakehouse_assets.ingestion.columns import INGESTED_AT_COLUMN, RESCUED_DATA_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.pipelines.export import plan_export, spark_pipelines_command, write_export
from lakehouse_assets.spark_conf import archive_options
from lakehouse_assets_tests.built import BuiltLakehouse
from lakehouse_assets_tests.conftest import SMALL_DATA_CONF, TEST_JVM_OPTIONS

REPOSITORY = Path(__file__).resolve().parents[2]
# What differs by construction: when a row was ingested, and what only our Auto Loader keeps.
NOT_COMPARED = {INGESTED_AT_COLUMN, RESCUED_DATA_COLUMN, SOURCE_LINE_COLUMN}
# spark-pipelines starts its own Spark and Connect server: about 45 s here when idle.
RUN_TIMEOUT_SECONDS = 600


def rows(path: Path, columns: list[str]) -> list[tuple]:
    """A Delta table's rows, read by delta-rs, sorted (floats rounded: sums in another order)."""
    dataset = DeltaTable(str(path)).to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(str(path), pafs.LocalFileSystem()))
    records = dataset.to_table(columns=columns).to_pylist()
    return sorted((tuple(round(v, 9) if isinstance(v, float) else v for v in r.values()) for r in records),
                  key=repr)


def columns_of(path: Path) -> list[str]:
    return [f.name for f in DeltaTable(str(path)).schema().fields]


@pytest.mark.slow
def test_spark_pipelines_runs_the_export_and_its_tables_equal_the_lakehouses(built: BuiltLakehouse,
                                                                             tmp_path: Path) -> None:
    # The reference lakehouse: every table the export runs in SDP (or reads by path) is built. The
    # export's spec carries the lakehouse's SQL settings, here the tests' settings for tiny data.
    settings = dataclasses.replace(built.settings, spark_conf=SMALL_DATA_CONF)
    definitions = project_definitions(settings)
    folder = tmp_path / "sdp"
    export = plan_export(folder, definitions.assets or [], project_packages(()), settings)
    write_export(export)

    command = spark_pipelines_command(settings, folder / "spark-pipeline.yml")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")]),
           # A JVM for one run, mapping the classes archived at install: its options reach it only
           # this way (spark-pipelines passes none on).
           "JAVA_TOOL_OPTIONS": archive_options(settings, TEST_JVM_OPTIONS)}
    run = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-6000:]

    assert {e.table for e in export.exported} == {"bronze.recordings", "silver.recordings_enriched",
                                                  "gold.daily_patient_avg", "gold.device_counts",
                                                  "bronze.patient_changes", "gold.patient_changes"}
    for exported in export.exported:
        layer, name = exported.table.split(".")
        theirs = folder / "spark-warehouse" / f"{layer}.db" / name
        ours = Path(settings.table_path(layer, name))
        assert (theirs / "_delta_log").is_dir(), f"{exported.table}: spark-pipelines wrote no Delta table at {theirs}"
        compared = [c for c in columns_of(ours) if c not in NOT_COMPARED]
        assert set(compared) <= set(columns_of(theirs)), exported.table
        expected = rows(ours, compared)
        assert expected, f"{exported.table}: the lakehouse's is empty"
        assert rows(theirs, compared) == expected, exported.table
