"""`lakehouse export-sdp` without Spark: which tables become which SDP datasets, which are left
out and why, and the files as pyspark's own spark-pipelines reads them (the spec, the Python
files compiling, the SQL). The run itself is in test_export_sdp_run.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.pipelines.cli import load_pipeline_spec

from lakehouse_assets.assets.discovery import project_packages, table_specs
from lakehouse_assets.cli import main
from lakehouse_assets.definitions import project_definitions
from lakehouse_assets.pipelines.export import SPEC_FILE, SdpExport, plan_export, write_export
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark_conf import LOCAL_DEFAULTS


def export_of(settings: LakehouseSettings, folder: Path) -> SdpExport:
    definitions = project_definitions(settings)
    return plan_export(folder, definitions.assets or [], project_packages(()), settings)


@pytest.fixture
def landed(settings: LakehouseSettings) -> LakehouseSettings:
    """Landing folders for both bronze tables, and a patients lookup table as silver keeps it."""
    for source in ("recordings", "patient_changes"):
        settings.landing_path(source).mkdir()
    write_deltalake(str(settings.table_path("silver", "patients")),
                    pa.table({"mrn": pa.array([1], pa.int64()), "name": ["Ada"]}))
    return settings


def test_every_table_is_exported_or_left_out_with_why(landed: LakehouseSettings, tmp_path: Path) -> None:
    export = export_of(landed, tmp_path / "sdp")

    tables = set(table_specs(project_definitions(landed).assets or []))
    exported = {e.table: e for e in export.exported}
    left_out = {o.table: o.reason for o in export.left_out}
    assert set(exported) | set(left_out) == tables and not set(exported) & set(left_out)
    assert {"bronze.recordings", "bronze.patient_changes", "silver.recordings_enriched", "gold.daily_patient_avg",
            "gold.device_counts"} <= set(exported)
    assert "AUTO CDC" in left_out["silver.patients_current"] and "AUTO CDC" in left_out["silver.patients_history"]
    assert "quarantine of silver.recordings_enriched" in left_out["silver.recordings_quarantine"]
    assert "['context', 'lakehouse']" in left_out["silver.patients"]
    assert "withWatermark" in left_out["gold.heartrate_5min"]
    # Never built, so a flow could not read it by path either.
    assert "silver.patients_current" in left_out["gold.patient_changes"]
    assert exported["gold.daily_patient_avg"].kind == "materialized view"
    assert exported["silver.recordings_enriched"].kind == "streaming table"
    assert "passing rows" in exported["silver.recordings_enriched"].note
    readme = export.files["README.md"]
    assert all(f"**{table}**" in readme for table in left_out)


def test_a_reader_of_a_table_the_lakehouse_never_built_is_left_out(settings: LakehouseSettings,
                                                                   tmp_path: Path) -> None:
    Path(settings.landing_path("recordings")).mkdir(parents=True)
    left_out = {o.table: o.reason for o in export_of(settings, tmp_path / "sdp").left_out}

    assert "landing/patient_changes" in left_out["bronze.patient_changes"]
    assert "silver.patients" in left_out["silver.recordings_enriched"]
    # Its SQL reads a table left out above: left out in turn, whatever order they are visited in.
    assert "silver.recordings_enriched" in left_out["gold.daily_patient_avg"]


def test_the_files_are_what_spark_pipelines_reads(landed: LakehouseSettings, tmp_path: Path) -> None:
    export = export_of(landed, tmp_path / "sdp")
    write_export(export)
    folder = tmp_path / "sdp"

    spec = load_pipeline_spec(folder / SPEC_FILE)
    assert spec.configuration["lakehouse.landing"] == str(landed.root / "landing")
    assert spec.configuration["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    # Static settings in the spec fail every flow (CANNOT_MODIFY_STATIC_CONFIG): the command line's.
    assert not {"spark.jars", "spark.sql.extensions", "spark.sql.catalogImplementation",
                "spark.sql.codegen.cache.maxEntries"} & set(spec.configuration)
    # The lakehouse's own driver settings for a small machine, not Spark's 200 shuffle partitions.
    assert spec.configuration["spark.sql.shuffle.partitions"] == LOCAL_DEFAULTS["spark.sql.shuffle.partitions"]
    for path in (folder / "transformations").glob("*.py"):
        ast.parse(path.read_text(), filename=str(path))
    enriched = (folder / "transformations" / "silver.recordings_enriched.py").read_text()
    assert "spark.readStream.table('bronze.recordings')" in enriched
    assert "load(ROOT + '/silver/patients')" in enriched
    daily = (folder / "transformations" / "gold.daily_patient_avg.sql").read_text()
    assert "CREATE MATERIALIZED VIEW gold.daily_patient_avg\nCOMMENT" in daily
    # Delta by default, never by name: a second run would fail altering the table's provider.
    assert spec.configuration["spark.sql.sources.default"] == "delta"
    assert "USING" not in daily and "format=" not in enriched
    assert "STREAM(" not in daily and "FROM silver.recordings_enriched" in daily
    assert "--jars" in (folder / "run.sh").read_text()


def test_the_command_refuses_a_folder_that_is_not_empty(landed: LakehouseSettings, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "sdp"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")

    assert main(["export-sdp", str(folder)]) == 1
    assert "not empty" in capsys.readouterr().err
    assert main(["export-sdp", str(folder), "--force"]) == 0
    out = capsys.readouterr().out
    assert "silver.recordings_quarantine" in out and "Left out" in out
    assert (folder / SPEC_FILE).is_file() and (folder / "notes.txt").read_text() == "mine"
