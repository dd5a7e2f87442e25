"""Columns a pipeline file builds at its top level, as Lakeflow's tutorials write them:
``dlt.apply_changes(..., sequence_by=col("operation_date"), apply_as_deletes=expr("operation =
'DELETE'"))`` and a condition a dataset's function uses later. They load with no Spark started,
and run through Dagster."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lakehouse_assets.definitions import build_definitions
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.assets.pipeline import delta_rows
from lakehouse_assets_tests.pipelines.reference import materialize_all
from lakehouse_assets_tests.pipelines.test_pipeline_loading import pipeline

CUSTOMERS = """
    import dlt
    from pyspark.sql.functions import *

    LANDING = spark.conf.get("lakehouse.landing")
    ACTIVE = (col("status") == "active") & col("email").isNotNull()


    @dlt.table(comment="Customer changes as landed")
    def customers_cdc():
        return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
                .option("cloudFiles.schemaHints", "id BIGINT, operation_date BIGINT")
                .load(f"{LANDING}/customers"))


    dlt.create_streaming_table("customers")
    dlt.apply_changes(
        target="customers",
        source="customers_cdc",
        keys=[col("id")],
        sequence_by=col("operation_date"),
        apply_as_deletes=expr("operation = 'DELETE'"),
        except_column_list=["operation", "operation_date", "_rescued_data"],
    )


    @dlt.table(comment="Customers still active, with an email")
    def active_customers():
        return dlt.read("customers").where(ACTIVE).select("id", upper(col("name")).alias("name"))
"""


def test_top_level_columns_load_without_spark_as_the_sql_text_they_say(tmp_path) -> None:
    # A fresh interpreter: classic pyspark's col() fails there without a SparkContext, as it
    # does where Dagster loads the code; the test session's SparkSession would hide that.
    folder = pipeline(tmp_path / "customers", CUSTOMERS + """
    dlt.create_streaming_table("deletions_by_flag")
    dlt.apply_changes(target="deletions_by_flag", source="customers_cdc", keys=["id"],
                      sequence_by="operation_date", apply_as_deletes=col("operation").isin("DELETE", "PURGE"),
                      column_list=[col("id"), col("name")])
    """)
    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from pyspark import SparkContext
        from lakehouse_assets.pipelines.assets import pipeline_assets
        from lakehouse_assets.settings import LakehouseSettings
        from lakehouse_assets.spec import TableSpec
        assets = pipeline_assets(Path({str(folder)!r}), LakehouseSettings.from_env())
        assert SparkContext._active_spark_context is None
        found = {{}}
        for spec in (s for a in assets for s in a.specs):
            cdc = TableSpec.of(spec.metadata).auto_cdc
            if cdc is not None:
                found[spec.key.path[-1]] = [list(cdc.keys), cdc.sequence_by, cdc.apply_as_deletes,
                                            cdc.column_list and list(cdc.column_list)]
        print(json.dumps(found, sort_keys=True))
    """)
    env = {"LAKEHOUSE_ROOT": str(tmp_path / "lakehouse"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "customers": [["id"], "operation_date", "operation = 'DELETE'", None],
        "deletions_by_flag": [["id"], "operation_date", "operation IN ('DELETE', 'PURGE')", ["id", "name"]],
    }


def test_a_column_with_no_sql_text_is_refused_naming_the_file_and_line(tmp_path, settings) -> None:
    from lakehouse_assets.pipelines.assets import pipeline_assets
    from lakehouse_assets.pipelines.spec import PipelineError

    folder = pipeline(tmp_path / "refused", """
        import dlt
        from pyspark.sql import functions as F

        dlt.create_streaming_table("customers")
        dlt.apply_changes(target="customers", source="changes", keys=["id"],
                          sequence_by=F.struct("operation_date", "id"))
    """)

    with pytest.raises(PipelineError) as raised:
        pipeline_assets(folder, settings)

    message = str(raised.value)
    assert "flows.py:6" in message and "sequence_by" in message and 'expr("...")' in message


CHANGES = [  # (id, name, email, status, operation, operation_date)
    (1, "ann", "ann@x", "active", "INSERT", 1),
    (2, "bob", None, "active", "INSERT", 1),
    (3, "cy", "cy@x", "active", "INSERT", 1),
    (1, "ann b", "ann@x", "active", "UPDATE", 3),
    (1, "ann a", "ann@y", "active", "UPDATE", 2),  # older than the update before it: ignored
    (3, "cy", "cy@x", "gone", "DELETE", 2),
    (4, "dee", "dee@x", "inactive", "INSERT", 2),
]


@pytest.mark.slow
def test_a_tutorial_style_cdc_pipeline_runs_with_its_top_level_columns(spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "lakehouse"))
    settings = LakehouseSettings.from_env()
    definitions = build_definitions(settings=settings, pipelines=[pipeline(tmp_path / "customers", CUSTOMERS)])
    landing = Path(settings.root) / "landing" / "customers"
    landing.mkdir(parents=True)
    keys = ("id", "name", "email", "status", "operation", "operation_date")
    for number, batch in enumerate((CHANGES[:3], CHANGES[3:])):
        (landing / f"{number}.json").write_text("".join(json.dumps(dict(zip(keys, c, strict=True))) + "\n"
                                                        for c in batch))
        materialize_all(definitions)

    # Computed here on its own: each id's latest change by operation_date, deletes removed.
    latest: dict[int, tuple] = {}
    for change in CHANGES:
        if change[0] not in latest or change[5] > latest[change[0]][5]:
            latest[change[0]] = change
    current = sorted((c[0], c[1], c[2], c[3]) for c in latest.values() if c[4] != "DELETE")
    assert delta_rows(settings, "default", "customers", ["id", "name", "email", "status"]) == current
    assert delta_rows(settings, "default", "active_customers", ["id", "name"]) == [
        (c[0], c[1].upper()) for c in current if c[3] == "active" and c[2] is not None]
