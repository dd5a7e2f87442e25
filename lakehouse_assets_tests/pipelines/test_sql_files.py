"""A pipeline's SQL files read without Spark: each statement a dataset with its reads,
columns and expectations, as the Python API would declare it; what cannot be mapped
refused naming the file, the line and the construct."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lakehouse_assets.pipelines.assets import LoadedPipeline, load_pipeline
from lakehouse_assets.pipelines.graph import DatasetKind
from lakehouse_assets.pipelines.reads import FileRead, TableRead
from lakehouse_assets.pipelines.session import PipelineRun, running
from lakehouse_assets.pipelines.spec import PipelineError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets.tables.sql_definition import OnViolation


def pipeline(folder: Path, sql: str, configuration: str = "") -> LoadedPipeline:
    (folder / "spark-pipeline.yml").write_text(
        f"name: p\nschema: sch\n{configuration}libraries:\n  - glob:\n      include: sql/**\n")
    (folder / "sql").mkdir(exist_ok=True)
    (folder / "sql" / "flows.sql").write_text(textwrap.dedent(sql))
    return load_pipeline(folder, LakehouseSettings.from_env())  # the root a test sets in the environment


def tables(loaded: LoadedPipeline, table: str) -> list[tuple[str, bool]]:
    return [(read.table, read.streamed) for read in loaded.reads[table].tables]


def test_each_statement_is_a_dataset_with_its_kind_names_resolved_as_the_pipeline_does(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "root"))
    loaded = pipeline(tmp_path, """
        -- names as written: unqualified, LIVE., schema.name, catalog.schema.name
        CREATE OR REFRESH STREAMING TABLE raw AS SELECT * FROM STREAM read_files('${lakehouse.landing}/events', format => 'json', schemaHints => 'id BIGINT', inferColumnTypes => true);
        CREATE STREAMING LIVE TABLE live.clean AS SELECT id FROM STREAM(LIVE.raw) WHERE id > 0;
        CREATE TEMPORARY LIVE VIEW recent AS SELECT * FROM STREAM main.sch.clean;
        CREATE LIVE TABLE other.counts AS
          WITH per_id AS (SELECT id, count(*) AS n FROM sch.clean GROUP BY id)
          SELECT per_id.id, per_id.n, extract(day FROM current_date()) AS day
          FROM per_id JOIN silver.known k ON k.id = per_id.id, `sch`.`raw` r
          WHERE per_id.id IN (SELECT id FROM gold.listed);
        CREATE OR REFRESH STREAMING TABLE latest AS SELECT * FROM recent;
        CREATE TEMPORARY LIVE TABLE kept AS SELECT * FROM sch.raw;
        CREATE STREAMING LIVE TABLE legacy AS SELECT * FROM cloud_files("${lakehouse.landing}/old", "csv", map("cloudFiles.header", "true"));
        CREATE MATERIALIZED VIEW lookup AS SELECT * FROM read_files('${lakehouse.landing}/lookup', format => 'csv', header => true, schema => 'id BIGINT, name STRING')
        """)

    kinds = {table: dataset.kind for table, dataset in loaded.datasets.items()}
    assert kinds == {"sch.raw": DatasetKind.streaming_table, "sch.clean": DatasetKind.streaming_table,
                     "sch.recent": DatasetKind.temporary_view, "other.counts": DatasetKind.materialized_view,
                     "sch.latest": DatasetKind.streaming_table, "sch.kept": DatasetKind.materialized_view,
                     "sch.legacy": DatasetKind.streaming_table,
                     "sch.lookup": DatasetKind.materialized_view}
    assert tables(loaded, "sch.clean") == [("sch.raw", True)]
    # The WITH's name is no table; EXTRACT's FROM reads none; a comma join and a subquery do.
    assert tables(loaded, "other.counts") == [("sch.clean", False), ("silver.known", False), ("sch.raw", False),
                                              ("gold.listed", False)]
    # A temporary view is inlined: its reader reads what it reads.
    assert tables(loaded, "sch.latest") == [("sch.clean", True)]
    landing = tmp_path / "root" / "landing"
    (raw,) = loaded.reads["sch.raw"].files
    assert raw == FileRead(str(landing / "events"), "json", True, True,
                           # read_files reads nested folders, as Databricks' does.
                           {"recursiveFileLookup": "true", "schemaHints": "id BIGINT", "inferColumnTypes": "true"},
                           raw.location)
    assert raw.location.line == 3
    (legacy,) = loaded.reads["sch.legacy"].files
    assert (legacy.path, legacy.format, legacy.streamed, legacy.cloud_files, legacy.options) == (
        str(landing / "old"), "csv", True, True, {"recursiveFileLookup": "true", "cloudFiles.header": "true"})
    (lookup,) = loaded.reads["sch.lookup"].files
    assert (lookup.format, lookup.streamed, lookup.cloud_files, lookup.options["header"]) == ("csv", False, False, "true")
    assert loaded.datasets["other.counts"].location.line == 6


def test_columns_expectations_comment_properties_layout_and_settings_are_the_datasets(tmp_path) -> None:
    loaded = pipeline(tmp_path, """
        SET spark.sql.shuffle.partitions = 4;
        USE SCHEMA silver_sql;
        CREATE OR REFRESH STREAMING TABLE readings (
          id BIGINT COMMENT 'The reading',
          value DOUBLE,
          CONSTRAINT id_present EXPECT (id IS NOT NULL) ON VIOLATION DROP ROW,
          CONSTRAINT value_known EXPECT (value > 0) ON VIOLATION FAIL UPDATE,
          CONSTRAINT counted EXPECT (value < 100)
        )
        COMMENT 'Readings, it\\'s said' CLUSTER BY (value, id) TBLPROPERTIES (delta.enableChangeDataFeed = true)
        AS SELECT id, value FROM STREAM(bronze.readings)
        """, configuration="configuration:\n  unused: x\n")

    dataset = loaded.datasets["silver_sql.readings"]
    assert dataset.comment == "Readings, it's said"
    assert dataset.table_properties == {"delta.enableChangeDataFeed": "true"}
    assert (dataset.clustered_by, dataset.partitioned_by) == (("value", "id"), ())
    assert [(f.name, f.dataType.simpleString(), f.metadata.get("comment")) for f in dataset.schema.fields] == [
        ("id", "bigint", "The reading"), ("value", "double", None)]
    assert [(e.name, e.condition, e.on_violation) for e in dataset.expectations] == [
        ("id_present", "id IS NOT NULL", OnViolation.drop_row), ("value_known", "value > 0", OnViolation.fail_update),
        ("counted", "value < 100", OnViolation.warn)]
    assert dataset.flow.spark_conf == {"spark.sql.shuffle.partitions": "4"}
    assert loaded.reads["silver_sql.readings"].tables == (
        TableRead("bronze.readings", True, loaded.reads["silver_sql.readings"].tables[0].location),)
    assert dataset.flow.func.__doc__ is None  # the description is the COMMENT


def test_configuration_is_substituted_and_a_missing_key_is_refused(tmp_path) -> None:
    loaded = pipeline(tmp_path, "CREATE MATERIALIZED VIEW t AS SELECT * FROM ${source}.events -- ${not.a.key}\n",
                      configuration="configuration:\n  source: bronze\n")
    assert tables(loaded, "sch.t") == [("bronze.events", False)]
    with pytest.raises(PipelineError, match=r"flows.sql:2: \$\{missing\} names a setting"):
        pipeline(tmp_path, "\nCREATE MATERIALIZED VIEW t AS SELECT * FROM ${missing}.events")


@pytest.mark.parametrize("statement, says", [
    ("CREATE FLOW f AS INSERT INTO t BY NAME SELECT * FROM STREAM(s)", "which no dataset of the pipeline defines"),
    ("CREATE FLOW f AS INSERT INTO ONCE t BY NAME SELECT * FROM s", "INSERT INTO ONCE (a backfill run once) is not mapped"),
    ("CREATE FLOW f AS AUTO CDC INTO t FROM STREAM(s) KEYS (id) SEQUENCE BY seq", "must be declared first"),
    ("CREATE FLOW f AS AUTO CDC INTO ok FROM STREAM(s) SEQUENCE BY seq", "the flow has no KEYS clause"),
    ("APPLY CHANGES INTO LIVE.t FROM STREAM(s) KEYS (id) SEQUENCE BY seq", "must be declared first"),
    ("APPLY CHANGES INTO LIVE.ok FROM s KEYS (id) SEQUENCE BY seq", "must read its changes FROM STREAM"),
    ("CREATE SINK k OPTIONS (kafka.bootstrap.servers = 'h:9092')", "CREATE SINK writes outside the lakehouse"),
    ("CREATE STREAMING TABLE t AS SELECT * FROM STREAM read_kafka(bootstrapServers => 'h:9092')", "read_kafka(...) is a Databricks-only function"),
    ("CREATE MATERIALIZED VIEW t AS SELECT ai_query('m', text) AS a FROM s", "ai_query(...) is a Databricks-only function"),
    ("CREATE MATERIALIZED VIEW t AS SELECT secret('scope', 'key') AS k FROM s", "secret(...) is a Databricks-only function"),
    ("CREATE STREAMING TABLE t AS SELECT * FROM cloud_files('/x', 'json', 3)", "cloud_files takes its options as map('key', 'value', ...)"),
    ("CREATE MATERIALIZED VIEW t PARTITIONED BY (d) CLUSTER BY (e) AS SELECT * FROM s", "both PARTITIONED BY and CLUSTER BY"),
    ("CREATE MATERIALIZED VIEW t CLUSTER BY AUTO AS SELECT * FROM s", "CLUSTER BY AUTO is not supported"),
    ("CREATE MATERIALIZED VIEW t PARTITIONED BY (upper(d)) AS SELECT * FROM s", "PARTITIONED BY takes column names"),
    ("CREATE MATERIALIZED VIEW t LOCATION '/x' AS SELECT * FROM s", "LOCATION"),
    ("CREATE VIEW t AS SELECT * FROM s", "CREATE VIEW is not a dataset the asset graph maps"),
    ("CREATE TABLE t AS SELECT * FROM s", "CREATE TABLE is not a dataset the asset graph maps"),
    ("DROP TABLE t", "'DROP TABLE t' is not a statement"),
    ("CREATE MATERIALIZED VIEW t AS SELECT * FROM STREAM(s)", "a materialized view reads its sources as they stand"),
    ("CREATE MATERIALIZED VIEW t AS SELECT * FROM read_files('/x')", "read_files reads format not given"),
    ("CREATE MATERIALIZED VIEW t AS SELECT * FROM read_files('/x', format => 'avro')", "read_files reads format avro"),
    ("CREATE MATERIALIZED VIEW t (n COMMENT 'no type') AS SELECT 1 AS n", "column n has no type"),
    ("CREATE MATERIALIZED VIEW t (CONSTRAINT c EXPECT (n > 0) ON VIOLATION IGNORE) AS SELECT 1 AS n", "ON VIOLATION DROP ROW"),
    ("CREATE TEMPORARY VIEW v (CONSTRAINT c EXPECT (n > 0)) AS SELECT 1 AS n", "a view inlined into its readers"),
    ("CREATE MATERIALIZED VIEW t AS SELECT FROM WHERE", "could not be read"),
])
def test_what_cannot_be_mapped_stops_the_load_naming_file_line_and_construct(tmp_path, statement, says) -> None:
    with pytest.raises(PipelineError) as refused:
        pipeline(tmp_path, f"CREATE MATERIALIZED VIEW ok AS SELECT 1 AS n;\n\n{statement};\n")
    message = str(refused.value)
    assert f"{tmp_path / 'sql' / 'flows.sql'}:3" in message
    assert says in message
    assert "\n" not in message


def test_create_flow_appends_into_a_streaming_table_or_applies_changes_auto_cdc(tmp_path) -> None:
    loaded = pipeline(tmp_path, """
        CREATE STREAMING TABLE visits COMMENT 'Visits of every clinic';
        CREATE FLOW from_a AS INSERT INTO visits BY NAME SELECT id, 'a' AS clinic FROM STREAM(bronze.clinic_a);
        CREATE FLOW from_b AS INSERT INTO LIVE.visits BY NAME SELECT id, 'b' AS clinic FROM STREAM bronze.clinic_b;
        CREATE OR REFRESH STREAMING TABLE customers;
        CREATE FLOW customers_cdc AS AUTO CDC INTO customers FROM STREAM(bronze.customer_changes)
          KEYS (id) APPLY AS DELETE WHEN op = 'D' SEQUENCE BY ts COLUMNS * EXCEPT (op, ts) STORED AS SCD TYPE 2
        """)

    visits = loaded.datasets["sch.visits"]
    assert [flow.name for flow in visits.flows] == ["from_a", "from_b"]
    assert tables(loaded, "sch.visits") == [("bronze.clinic_a", True), ("bronze.clinic_b", True)]
    customers = loaded.datasets["sch.customers"].flow
    assert customers.name == "customers_cdc" and customers.source == "bronze.customer_changes"
    assert customers.auto_cdc is not None
    assert (customers.auto_cdc.keys, customers.auto_cdc.sequence_by, customers.auto_cdc.stored_as_scd_type,
            customers.auto_cdc.apply_as_deletes, customers.auto_cdc.except_column_list) == (
        ("id",), "ts", 2, "op = 'D'", ("op", "ts"))
    assert tables(loaded, "sch.customers") == [("bronze.customer_changes", True)]


def test_apply_changes_into_is_the_same_auto_cdc_as_lakeflows_older_pipelines_write_it(tmp_path) -> None:
    # As Databricks' CDC tutorial and most published SQL pipelines write it.
    loaded = pipeline(tmp_path, """
        CREATE OR REFRESH STREAMING LIVE TABLE customer_silver;
        APPLY CHANGES INTO LIVE.customer_silver
        FROM stream(LIVE.customer_bronze_clean)
          KEYS (id)
          APPLY AS DELETE WHEN operation = "DELETE"
          SEQUENCE BY operation_date
          COLUMNS * EXCEPT (operation, operation_date, _rescued_data);
        CREATE OR REFRESH STREAMING TABLE customer_history;
        APPLY CHANGES INTO customer_history FROM STREAM bronze.customer_changes
          KEYS (id) SEQUENCE BY operation_date COLUMNS id, name, city STORED AS SCD TYPE 2 TRACK HISTORY ON name, city
        """)

    silver = loaded.datasets["sch.customer_silver"].flow
    assert silver.name == "customer_silver" and silver.source == "sch.customer_bronze_clean"
    assert silver.auto_cdc is not None
    assert (silver.auto_cdc.keys, silver.auto_cdc.sequence_by, silver.auto_cdc.apply_as_deletes,
            silver.auto_cdc.except_column_list, silver.auto_cdc.stored_as_scd_type) == (
        ("id",), "operation_date", 'operation = "DELETE"', ("operation", "operation_date", "_rescued_data"), 1)
    history = loaded.datasets["sch.customer_history"].flow
    assert history.auto_cdc is not None
    assert (history.source, history.auto_cdc.column_list, history.auto_cdc.stored_as_scd_type,
            history.auto_cdc.track_history_column_list) == (
        "bronze.customer_changes", ("id", "name", "city"), 2, ("name", "city"))


def test_a_sql_notebook_export_is_read_as_its_cells(tmp_path) -> None:
    loaded = pipeline(tmp_path, """\
        -- Databricks notebook source
        -- MAGIC %md
        -- MAGIC # Customers: bronze to silver

        -- COMMAND ----------

        SET pipelines.trigger.interval

        -- COMMAND ----------

        CREATE OR REFRESH STREAMING LIVE TABLE customers_clean
        COMMENT 'Customers with an id'
        AS SELECT * FROM STREAM(bronze.customers) WHERE id IS NOT NULL

        -- COMMAND ----------

        CREATE OR REFRESH LIVE TABLE customer_count AS SELECT count(*) AS n FROM LIVE.customers_clean;
        """)

    assert sorted(loaded.datasets) == ["sch.customer_count", "sch.customers_clean"]
    assert tables(loaded, "sch.customers_clean") == [("bronze.customers", True)]
    assert tables(loaded, "sch.customer_count") == [("sch.customers_clean", False)]
    with pytest.raises(PipelineError, match=r"flows.sql:6: "):  # lines keep their numbers
        pipeline(tmp_path, "-- Databricks notebook source\n-- COMMAND ----------\n\n-- COMMAND ----------\n\n"
                           "CREATE OR REFRESH LIVE\n")


def test_a_dataset_defined_twice_across_files_is_refused(tmp_path) -> None:
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "more.sql").write_text("CREATE MATERIALIZED VIEW sch.t AS SELECT 2 AS n")
    with pytest.raises(PipelineError, match="defined twice"):
        pipeline(tmp_path, "CREATE MATERIALIZED VIEW t AS SELECT 1 AS n")


def test_a_query_runs_with_its_views_inlined_its_files_read_and_its_own_braces_kept(spark, tmp_path) -> None:
    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path / "lakehouse")})
    files = Path(settings.landing_path("files"))
    files.mkdir(parents=True)
    (files / "a.json").write_text('{"id": 1, "name": "ann"}\n{"id": -2, "name": "bob"}\n')
    loaded = pipeline(tmp_path, """
        CREATE TEMPORARY VIEW people AS
          SELECT * FROM read_files('${folder}', format => 'json', schema => 'id BIGINT, name STRING');
        CREATE MATERIALIZED VIEW named AS
          WITH p AS (SELECT * FROM LIVE.people)
          SELECT id, concat('{', name, '}') AS braced FROM p WHERE id > 0
        """, configuration=f"configuration:\n  folder: {files}\n")
    dataset = loaded.datasets["sch.named"]
    run = PipelineRun(spark, "sch.named", loaded.views, settings, loaded.session, DeltaTableStore())

    with running(run):
        frame = dataset.flow.func()

    assert not frame.isStreaming
    assert [tuple(row) for row in frame.collect()] == [(1, "{ann}")]
