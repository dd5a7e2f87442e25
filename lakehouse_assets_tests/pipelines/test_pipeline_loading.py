"""Loading a pipeline folder: the assets its datasets become, with no Spark started; Lakeflow's
older `import dlt` names; temporary views inlined; and a clear refusal, naming the file and
the line, of what the asset graph cannot map."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_assets.pipelines.assets import pipeline_assets
from lakehouse_assets.pipelines.spec import PipelineError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spec import TableSpec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reference_lakeflow_python"
SPEC = "name: {name}\nlibraries:\n  - glob:\n      include: transformations/**\n"


def pipeline(folder: Path, source: str, *, name: str = "p", file: str = "flows.py") -> Path:
    """A pipeline folder holding one source file."""
    (folder / "transformations").mkdir(parents=True, exist_ok=True)
    (folder / "spark-pipeline.yml").write_text(SPEC.format(name=name))
    (folder / "transformations" / file).write_text(textwrap.dedent(source))
    return folder


def specs(assets: list[dg.AssetsDefinition]) -> dict[str, dg.AssetSpec]:
    return {spec.key.to_user_string(): spec for asset in assets for spec in asset.specs}


def table_spec(asset_spec: dg.AssetSpec) -> TableSpec:
    declared = TableSpec.of(asset_spec.metadata)
    assert declared is not None, f"{asset_spec.key.to_user_string()} declares no table"
    return declared


def test_loading_a_pipeline_starts_no_spark_and_names_each_dataset(tmp_path) -> None:
    # A fresh interpreter: the test session's own SparkSession would hide one started by the load.
    script = textwrap.dedent(f"""
        from pathlib import Path
        from pyspark import SparkContext
        from lakehouse_assets.pipelines.assets import pipeline_assets
        from lakehouse_assets.settings import LakehouseSettings
        assets = pipeline_assets(Path({str(EXAMPLE)!r}), LakehouseSettings.from_env())
        assert SparkContext._active_spark_context is None
        print(sorted(spec.key.to_user_string() for asset in assets for spec in asset.specs))
    """)
    env = {"LAKEHOUSE_ROOT": str(tmp_path / "lakehouse"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sorted([
        "default/daily_patient_avg", "default/device_counts", "default/patient_changes_bronze", "default/patients",
        "default/patients_current", "default/patients_history", "default/recordings_bronze",
        "default/recordings_enriched", "default/recordings_enriched_quarantine"]))


def test_a_datasets_upstream_description_and_code_location_come_from_its_source(settings) -> None:
    found = specs(pipeline_assets(EXAMPLE, settings))

    enriched = found["default/recordings_enriched"]
    assert {dep.asset_key.to_user_string() for dep in enriched.deps} == {"default/recordings_bronze", "default/patients"}
    assert table_spec(enriched).streams_from == ("default.recordings_bronze",)
    assert enriched.description.startswith("Recordings of known patients")
    [reference] = enriched.metadata["dagster/code_references"].code_references
    assert reference.file_path.endswith("recordings.py") and reference.line_number > 1
    bronze = found["default/recordings_bronze"]
    assert {dep.asset_key.to_user_string() for dep in bronze.deps} == {"landing/recordings"}
    assert bronze.metadata["lakehouse/landing_folders"]["recordings"]["streamed"] is True
    patients = found["default/patients"]
    assert patients.metadata["lakehouse/landing_folders"]["patients"] == {
        "format": "csv", "description": None, "streamed": False, "header": True, "multi_line": False, "pattern": None}
    assert table_spec(found["default/recordings_enriched_quarantine"]).quarantine_for == "default.recordings_enriched"


LEGACY = """
    import dlt
    from pyspark.sql import functions as F

    @dlt.view
    def raw_changes():
        return dlt.read_stream("source_table")

    @dlt.table(name="clean")
    @dlt.expect_all_or_drop({"has key": "id IS NOT NULL", "positive": "value > 0"})
    @dlt.expect_or_fail("no overflow", "value < 1000000")
    def clean_table():
        return dlt.read_stream("raw_changes").withColumn("doubled", F.col("value") * 2)

    @dlt.table
    def totals():
        return dlt.read("clean").groupBy("id").count()
"""


def test_lakeflows_older_dlt_names_load_and_an_installed_dlt_package_is_left_alone(tmp_path, settings,
                                                                                    monkeypatch) -> None:
    installed = tmp_path / "site" / "dlt"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("WHO = 'the installed dlt'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    sys.modules.pop("dlt", None)

    found = specs(pipeline_assets(pipeline(tmp_path / "legacy", LEGACY), settings))

    import dlt
    assert dlt.WHO == "the installed dlt"
    assert set(found) == {"default/clean", "default/clean_quarantine", "default/totals"}
    clean = found["default/clean"]
    # The view is inlined: clean reads what raw_changes reads, as a stream.
    assert {dep.asset_key.to_user_string() for dep in clean.deps} == {"default/source_table"}
    assert table_spec(clean).streams_from == ("default.source_table",)
    expectations = {e.name: e.on_violation for e in table_spec(clean).expectations}
    assert expectations == {"has_key": "drop row", "positive": "drop row", "no_overflow": "fail update"}
    assert {dep.asset_key.to_user_string() for dep in found["default/totals"].deps} == {"default/clean"}


@pytest.mark.parametrize(("source", "refused"), [
    ("""
     from pyspark import pipelines as dp

     @dp.table
     def events():
         return spark.readStream.format("kafka").option("subscribe", "t").load()
     """, "format 'kafka'"),
    ("""
     from pyspark import pipelines as dp

     dp.create_sink("out", format="kafka", options={"topic": "t"})
     """, "sink 'out'"),
    ("""
     from pyspark import pipelines as dp

     @dp.materialized_view
     def secrets():
         return spark.read.table(dbutils.secrets.get("s", "k"))
     """, "dbutils is Databricks' own"),
    ("""
     from pyspark import pipelines as dp

     @dp.materialized_view(partition_cols=["day"], cluster_by=["id"])
     def daily():
         return spark.read.table("events")
     """, "sets both partition_cols and cluster_by"),
    ("""
     from pyspark import pipelines as dp

     @dp.table
     def raw():
         return spark.readStream.format("cloudFiles").option("cloudFiles.format", "json").load("/elsewhere/raw")
     """, "outside the lakehouse's landing folders"),
    ("""
     from pyspark import pipelines as dp

     @dp.materialized_view
     def configured():
         return spark.read.table(spark.conf.get("source_table"))
     """, "spark.conf.get('source_table')"),
    ("""
     from pyspark import pipelines as dp

     @dp.expect("positive", "value > 0")
     @dp.table
     def upside_down():
         return spark.readStream.table("events")
     """, "put it below @dp.table"),
    ("""
     from pyspark import pipelines as dp

     dp.create_streaming_table("current")
     dp.create_auto_cdc_from_snapshot_flow(target="current", source="snapshots", keys=["id"],
                                           track_history_except_column_list=["note"])
     """, "track_history_except_column_list=...) is not mapped"),
    ("""
     import dlt

     dlt.apply_changes(target="current", source="changes", keys=["id"], sequence_by="seq")
     """, "must be declared first with dp.create_streaming_table"),
], ids=["kafka", "sink", "dbutils", "partitioned_and_clustered", "outside_landing", "unset_configuration", "expect_above",
        "cdc_from_snapshot", "cdc_without_table"])
def test_what_cannot_be_mapped_stops_the_load_naming_the_file_and_line(tmp_path, settings, source, refused) -> None:
    folder = pipeline(tmp_path / "refused", source)

    with pytest.raises(PipelineError) as raised:
        pipeline_assets(folder, settings)

    message = str(raised.value)
    assert refused in message
    assert str(folder / "transformations" / "flows.py") in message or "spark-pipeline.yml" in message
    if "spark-pipeline.yml" not in message:
        assert f"flows.py:{_line_of(source, refused)}" in message


def _line_of(source: str, refused: str) -> int:
    """The line of the construct a refusal names (the decorator's line for a dataset's arguments)."""
    lines = textwrap.dedent(source).splitlines()
    needles = {"format 'kafka'": "kafka", "sink 'out'": "create_sink", "dbutils is Databricks' own": "dbutils",
               "sets both partition_cols and cluster_by": "partition_cols", "outside the lakehouse's landing folders": "load(",
               "put it below @dp.table": "@dp.expect",
               "track_history_except_column_list=...) is not mapped": "from_snapshot",
               "must be declared first with dp.create_streaming_table": "apply_changes"}
    return next(number for number, line in enumerate(lines, start=1) if needles[refused] in line)


def test_a_python_notebook_export_loads_as_the_python_it_is(tmp_path, settings) -> None:
    # Cells, magic lines, a star import and a blank line between a decorator and its function.
    folder = pipeline(tmp_path / "notebook", """\
        # Databricks notebook source
        # MAGIC %md
        # MAGIC # Orders, bronze to silver

        # COMMAND ----------

        import dlt
        from pyspark.sql.functions import *

        # COMMAND ----------

        @dlt.table(comment="Orders as they arrive")

        def orders_raw():
            return spark.readStream.table("bronze.orders")

        # COMMAND ----------

        @dlt.table
        @dlt.expect_or_drop("positive_amount", "amount > 0")
        def orders_clean():
            return dlt.read_stream("orders_raw").where(col("amount").isNotNull())
        """, file="orders.py")

    loaded = specs(pipeline_assets(folder, settings))

    assert sorted(loaded) == ["default/orders_clean", "default/orders_clean_quarantine", "default/orders_raw"]
    assert loaded["default/orders_raw"].description == "Orders as they arrive"
    assert {d.asset_key.to_user_string() for d in loaded["default/orders_clean"].deps} == {"default/orders_raw"}


def test_an_auto_cdc_flow_is_an_auto_cdc_table_reading_its_change_feed(tmp_path, settings) -> None:
    folder = pipeline(tmp_path / "cdc", """
        from pyspark import pipelines as dp

        dp.create_streaming_table("customers", comment="The customers as they are now")
        dp.create_auto_cdc_flow(target="customers", source="raw.customer_changes", keys=["id"], sequence_by="ts",
                                apply_as_deletes="op = 'D'", except_column_list=["op", "ts"], stored_as_scd_type=2)
    """)

    [customers] = specs(pipeline_assets(folder, settings)).values()

    assert customers.key.to_user_string() == "default/customers"
    assert {dep.asset_key.to_user_string() for dep in customers.deps} == {"raw/customer_changes"}
    cdc = table_spec(customers).auto_cdc
    assert cdc is not None
    assert (cdc.keys, cdc.stored_as_scd_type, cdc.apply_as_deletes) == (("id",), 2, "op = 'D'")
    assert customers.description == "The customers as they are now"


def test_a_pipeline_folder_without_a_spec_is_refused_naming_it(tmp_path) -> None:
    with pytest.raises(PipelineError, match="must hold one pipeline spec"):
        pipeline_assets(tmp_path, LakehouseSettings.from_env())


@pytest.mark.parametrize(("example", "bronze"), [(EXAMPLE, "default/recordings_bronze"),
                                                 (EXAMPLE.with_name("reference_lakeflow_sql"),
                                                  "lakeflow_sql/recordings_bronze")])
def test_a_pipeline_loads_for_the_lakehouse_it_is_given_whatever_the_environment_names(tmp_path, monkeypatch,
                                                                                      example, bronze) -> None:
    # verify and the crash harness check a lakehouse their settings name, LAKEHOUSE_ROOT another:
    # what a file reads as it loads (spark.conf.get("lakehouse.landing"), ${lakehouse.landing}
    # in SQL) is the given one's.
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "another"))
    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path / "lakehouse")})

    bronze = specs(pipeline_assets(example, settings))[bronze]

    assert {dep.asset_key.to_user_string() for dep in bronze.deps} == {"landing/recordings"}


def test_lakeflows_own_arguments_load_and_keep_the_lines_they_are_written_on(tmp_path, settings) -> None:
    source = """\
        import dlt


        @dlt.table(temporary=True, comment="kept out of the catalog on Databricks")
        def staged():
            return spark.readStream.table("events")


        dlt.create_streaming_table("checked", expect_all_or_drop={"has_id": "id IS NOT NULL"})


        @dlt.append_flow(target="checked")
        def staged_in():
            return dlt.read_stream("staged")
        """
    found = specs(pipeline_assets(pipeline(tmp_path / "lakeflow_args", source), settings))

    lines = textwrap.dedent(source).splitlines()
    for key, written in (("default/staged", "@dlt.table("), ("default/checked", "create_streaming_table")):
        [reference] = found[key].metadata["dagster/code_references"].code_references
        assert reference.file_path.endswith("flows.py")
        assert written in lines[reference.line_number - 1]
    assert {e.name: e.on_violation for e in table_spec(found["default/checked"]).expectations} == {
        "has_id": "drop row"}
    assert "default/checked_quarantine" in found
