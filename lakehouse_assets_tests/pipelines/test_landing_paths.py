"""Landing paths as published pipelines write them, and ``expect_or_drop`` where Lakeflow
allows it: a glob over batch folders (two tables reading one folder), a path of the authors'
own workspace mapped with ``lakehouse.mounts``, Auto Loader's defaults (CSV headers,
``inferSchema``) and ``_metadata``; records dropped by an Auto Loader table, by a table
declared with ``expect_all_or_drop``, by a view feeding AUTO CDC and by a materialized view,
each into a quarantine; a Python and a SQL notebook export (``APPLY CHANGES INTO``). Run through Dagster from the landing sensors, compared with an
independent computation, and checked by ``lakehouse verify``."""

from __future__ import annotations

import csv
import json
import textwrap
from collections import defaultdict
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_assets.definitions import build_definitions
from lakehouse_assets.ingestion.files import path_matches
from lakehouse_assets.pipelines.landing_paths import landed_path
from lakehouse_assets.pipelines.spec import PipelineError, load_project
from lakehouse_assets.reliability import check_all, declared_flows
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.assets.pipeline import delta_rows
from lakehouse_assets_tests.pipelines.reference import run_landing_sensors, settle

SPEC = """\
name: retail
configuration:
  lakehouse.mounts: /Volumes/main/ref = ref, /databricks-datasets/retail-org = .
libraries:
  - glob:
      include: transformations/**
"""

RETAIL = """
    # Databricks notebook source
    # MAGIC %md
    # MAGIC # Retail, as a notebook export: cells, magic lines, a module-level col()

    # COMMAND ----------

    import dlt
    from pyspark.sql.functions import col, sum as total

    LANDING = spark.conf.get("lakehouse.landing")

    # COMMAND ----------


    @dlt.table(comment="Orders of every batch folder")
    @dlt.expect_or_drop("valid_amount", "amount > 0")
    def orders_raw():
        return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "csv")
                .option("cloudFiles.schemaHints", "order_id BIGINT, customer_id BIGINT, amount DOUBLE")
                .load(f"{LANDING}/retail/batch_*/orders.csv")
                .select("*", col("_metadata.file_name").alias("landed_as")))


    dlt.create_streaming_table("orders_checked", expect_all_or_drop={"has_customer": "customer_id IS NOT NULL"})


    @dlt.append_flow(target="orders_checked")
    def orders_in():
        return dlt.read_stream("orders_raw").select("order_id", "customer_id", "amount")


    @dlt.table(comment="Customer changes of every batch folder")
    def customers_raw():
        return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "csv")
                .option("inferSchema", "true").load(f"{LANDING}/retail/batch_*/customers.csv"))


    @dlt.view
    @dlt.expect_or_drop("has_region", "region_id IS NOT NULL")
    def customers_clean():
        return dlt.read_stream("customers_raw")


    dlt.create_target_table("customers")
    dlt.apply_changes(target="customers", source="customers_clean", keys=["customer_id"], sequence_by=col("version"),
                      except_column_list=["version", "_rescued_data", "_source_file", "_source_line", "_ingested_at"])


    @dlt.table(comment="Regions, from the authors' own volume")
    def regions():
        return spark.read.json("/Volumes/main/ref/regions/")


    @dlt.table(comment="Revenue per region")
    @dlt.expect_or_drop("known_region", "region IS NOT NULL")
    def revenue_by_region():
        orders = dlt.read("orders_checked")
        customers = dlt.read("customers").select("customer_id", "region_id")
        return (orders.join(customers, "customer_id", "left").join(dlt.read("regions"), "region_id", "left")
                .groupBy("region").agg(total("amount").alias("revenue")))
"""

# (order_id, customer_id, amount) by batch folder; (customer_id, region_id, version) changes.
ORDERS = {"batch_1": [(1, 10, 5.0), (2, 11, 7.5), (3, 10, -1.0)], "batch_2": [(4, 12, 2.0), (5, 13, 4.0), (6, None, 1.0)]}
CUSTOMERS = {"batch_1": [(10, 1, 1), (11, 2, 1)], "batch_2": [(12, 1, 1), (11, 1, 2), (13, None, 1)]}
REGIONS = [{"region_id": 1, "region": "north"}, {"region_id": 2, "region": "south"}]


# Lakeflow's older SQL spelling, in a SQL notebook export, over the Python file's view.
HISTORY = """\
-- Databricks notebook source
-- MAGIC %md
-- MAGIC Every region a customer was in

-- COMMAND ----------

CREATE OR REFRESH STREAMING TABLE customers_history

-- COMMAND ----------

APPLY CHANGES INTO LIVE.customers_history
FROM STREAM(LIVE.customers_clean)
KEYS (customer_id)
SEQUENCE BY version
COLUMNS * EXCEPT (version, _rescued_data, _source_file, _source_line, _ingested_at)
STORED AS SCD TYPE 2
"""


def _project(tmp_path: Path) -> Path:
    folder = tmp_path / "retail_pipeline"
    (folder / "transformations").mkdir(parents=True)
    (folder / "spark-pipeline.yml").write_text(SPEC)
    (folder / "transformations" / "retail.py").write_text(textwrap.dedent(RETAIL))
    (folder / "transformations" / "history.sql").write_text(HISTORY)
    return folder


def test_a_path_lands_in_the_folder_its_first_part_names_with_the_rest_its_pattern(tmp_path) -> None:
    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path / "lakehouse")})
    project = load_project(_project(tmp_path))
    landing = Path(settings.root) / "landing"

    glob = landed_path(f"{landing}/retail/batch_*/orders.csv", project, settings)
    assert (glob.source, glob.pattern, glob.spark_path) == (
        "retail", "batch_*/orders.csv", f"{landing}/retail/batch_*/orders.csv")
    assert landed_path(f"{landing}/orders/", project, settings).pattern is None
    mounted = landed_path("/Volumes/main/ref/regions/", project, settings)
    assert (mounted.source, mounted.pattern) == ("ref", "regions")
    by_root = landed_path("/databricks-datasets/retail-org/customers/2024/01.json", project, settings)
    assert (by_root.source, by_root.pattern) == ("customers", "2024/01.json")

    with pytest.raises(PipelineError, match=r"outside the lakehouse's landing folders.*lakehouse\.mounts"):
        landed_path("/mnt/raw/orders", project, settings)
    with pytest.raises(PipelineError, match="names no landing folder"):
        landed_path(f"{landing}/*.json", project, settings)


def test_on_object_storage_a_path_lands_as_its_key_names_it(tmp_path) -> None:
    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": "s3a://bucket/lake"})
    project = load_project(_project(tmp_path))

    glob = landed_path("s3://bucket/lake/landing/retail/batch_*/orders.csv", project, settings)
    assert (glob.source, glob.pattern, glob.spark_path) == (
        "retail", "batch_*/orders.csv", "s3a://bucket/lake/landing/retail/batch_*/orders.csv")
    mounted = landed_path("/Volumes/main/ref/regions/", project, settings)
    assert (mounted.source, mounted.pattern, mounted.spark_path) == (
        "ref", "regions", "s3a://bucket/lake/landing/ref/regions")
    by_root = landed_path("/databricks-datasets/retail-org/customers/2024/01.json", project, settings)
    assert (by_root.source, by_root.pattern) == ("customers", "2024/01.json")
    with pytest.raises(PipelineError, match=r"outside the lakehouse's landing folders \(s3a://bucket/lake/landing"):
        landed_path("s3a://other-bucket/lake/landing/orders", project, settings)


def test_a_path_pattern_names_files_and_folders_part_by_part() -> None:
    assert path_matches("batch_1/orders.csv", "batch_*/orders.csv")
    assert not path_matches("batch_1/customers.csv", "batch_*/orders.csv")
    assert not path_matches("orders.csv", "batch_*/orders.csv")
    assert path_matches("regions/2024/a.json", "regions")  # a folder: every file below it
    assert not path_matches("regions_old/a.json", "regions")


@pytest.mark.slow
def test_globs_mounts_and_dropped_rows_run_from_the_landing_sensors(spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "lakehouse"))
    settings = LakehouseSettings.from_env()
    definitions = build_definitions(settings=settings, pipelines=[_project(tmp_path)])
    landing = Path(settings.root) / "landing"
    for batch, orders in ORDERS.items():
        folder = landing / "retail" / batch
        folder.mkdir(parents=True)
        _write_csv(folder / "orders.csv", ("order_id", "customer_id", "amount"), orders)
        _write_csv(folder / "customers.csv", ("customer_id", "region_id", "version"), CUSTOMERS[batch])
    (landing / "ref" / "regions").mkdir(parents=True)
    (landing / "ref" / "regions" / "regions.json").write_text("".join(json.dumps(r) + "\n" for r in REGIONS))
    settle(landing)

    runs = run_landing_sensors(definitions, dg.DagsterInstance.ephemeral(), ("ref", "retail"))
    assert runs and all(run.success for run in runs)

    # Computed here on its own.
    orders = [o for batch in ORDERS.values() for o in batch]
    changes = [c for batch in CUSTOMERS.values() for c in batch]
    region_of = {c: r for c, r, _ in sorted((c for c in changes if c[1] is not None), key=lambda c: c[2])}
    name_of = {r["region_id"]: r["region"] for r in REGIONS}
    revenue: dict[str | None, float] = defaultdict(float)
    for _, customer, amount in orders:
        if amount > 0 and customer is not None:
            revenue[name_of.get(region_of.get(customer))] += amount
    assert delta_rows(settings, "default", "orders_raw", ["order_id", "amount", "landed_as"], key=repr) == sorted(
        ((o, a, "orders.csv") for o, _, a in orders if a > 0), key=repr)
    assert delta_rows(settings, "default", "orders_raw_quarantine", ["order_id", "_quarantine_reason"]) == [
        (3, "valid_amount")]
    assert delta_rows(settings, "default", "orders_checked_quarantine", ["order_id", "_quarantine_reason"]) == [
        (6, "has_customer")]
    # The view's dropped change is kept in its quarantine, not lost on its way to AUTO CDC.
    assert delta_rows(settings, "default", "customers_clean_quarantine", ["customer_id"]) == [(13,)]
    assert delta_rows(settings, "default", "customers", ["customer_id", "region_id"]) == sorted(region_of.items())
    versions = sorted((c, r, v) for c, r, v in changes if r is not None)
    assert delta_rows(settings, "default", "customers_history", ["customer_id", "region_id", "__END_AT"], key=repr) == \
        sorted(((c, r, None if (c, v) == max((k, w) for k, _, w in versions if k == c) else
                 next(w for k, _, w in versions if k == c and w > v)) for c, r, v in versions), key=repr)
    assert delta_rows(settings, "default", "regions", ["region_id", "region"]) == sorted(
        (r["region_id"], r["region"]) for r in REGIONS)
    assert delta_rows(settings, "default", "revenue_by_region", ["region", "revenue"]) == sorted(
        (region, total) for region, total in revenue.items() if region is not None)
    assert delta_rows(settings, "default", "revenue_by_region_quarantine", ["revenue", "_quarantine_reason"]) == [
        (revenue[None], "known_region")]

    # verify: each landed order in orders_raw or its quarantine once; customers.csv files
    # beside them are not orders_raw's to count.
    report = check_all(LakehouseResource.from_settings(settings), flows=declared_flows(definitions.assets or []))
    assert report.ok, report.summary()
    landed = report.result("landed_once")
    assert {"default.orders_raw", "default.customers_raw"} <= set(landed.checked)


def _write_csv(path: Path, header: tuple[str, ...], rows: list[tuple]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
