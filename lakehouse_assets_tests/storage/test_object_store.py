"""S3-API object storage: the settings come from the AWS variables, and the Spark the lakehouse
builds reads, writes, merges and streams Delta tables on a real S3-API server (s3proxy, started
on loopback) with the jars `make install` resolves."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.location import locate
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings, ObjectStore
from lakehouse_assets.spark_conf import engine_conf
from lakehouse_assets_tests.s3_server import S3Server


def test_the_object_store_is_read_from_the_aws_variables_and_keeps_no_secret(tmp_path: Path) -> None:
    env = {"LAKEHOUSE_ROOT": str(tmp_path), "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1",
           "AWS_ACCESS_KEY_ID": "key-id", "AWS_SECRET_ACCESS_KEY": "very-secret"}
    settings = LakehouseSettings.from_env(env)
    assert settings.object_store == ObjectStore("http://127.0.0.1:9000", "eu-west-1")
    conf = engine_conf(settings)
    assert {key: conf[key] for key in conf if key.startswith("spark.hadoop.fs.s3a.")} == {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.path.style.access": "true",  # a custom endpoint is addressed by path
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
        "spark.hadoop.fs.s3a.input.stream.type": "classic",
    }
    # Spark's settings show in its UI and logs: S3A reads the credentials from the environment.
    assert not any("very-secret" in value or "key-id" in value for value in conf.values())
    # On AWS itself: nothing but the region and the stream.
    plain = engine_conf(LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path), "AWS_DEFAULT_REGION": "us-east-2"}))
    assert "spark.hadoop.fs.s3a.endpoint" not in plain and plain["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-2"
    # The user's own Spark settings win over the derived ones.
    mine = LakehouseSettings.from_env({**env, "LAKEHOUSE_SPARK_CONF": '{"spark.hadoop.fs.s3a.path.style.access": "false"}'})
    assert engine_conf(mine)["spark.hadoop.fs.s3a.path.style.access"] == "false"


def test_an_endpoint_that_is_not_a_url_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="AWS_ENDPOINT_URL must be an http:// or https:// URL"):
        LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path), "AWS_ENDPOINT_URL": "127.0.0.1:9000"})


@pytest.fixture
def on_server(spark_on_s3: S3Server) -> str:
    """A bucket of the server the shared session reaches; its name."""
    return spark_on_s3.bucket("lake")


@pytest.mark.slow
def test_delta_tables_are_written_merged_and_streamed_on_the_server(spark: SparkSession, on_s3: S3Server,
                                                                    on_server: str) -> None:
    from delta.tables import DeltaTable as SparkDeltaTable

    table = f"s3a://{on_server}/bronze/numbers"
    spark.range(100).write.format("delta").save(table)
    spark.range(100, 110).write.format("delta").mode("append").save(table)
    updates = spark.range(95, 105).selectExpr("id", "id * 10 AS tens")
    (SparkDeltaTable.forPath(spark, table).alias("t").merge(updates.alias("u"), "t.id = u.id")
     .whenMatchedDelete().execute())
    copy = f"s3a://{on_server}/silver/numbers"

    def increment() -> None:
        query = (spark.readStream.format("delta").load(table).writeStream.format("delta")
                 .option("checkpointLocation", f"s3a://{on_server}/_checkpoints/silver/numbers")
                 .trigger(availableNow=True).start(copy))
        query.awaitTermination()

    increment()
    assert spark.read.format("delta").load(table).count() == 100  # 110 written, 10 deleted by the merge
    assert spark.read.format("delta").load(copy).count() == 100  # a new stream starts from the table as it is
    spark.range(200, 205).write.format("delta").mode("append").save(table)
    increment()  # from its checkpoint on the server: only what was appended since
    assert spark.read.format("delta").load(copy).count() == 105
    # The store of a lakehouse on the server reads it where it is without Spark (delta-rs), at
    # the endpoint the settings give S3A.
    store = LakehouseResource.from_settings(
        LakehouseSettings.from_env({"LAKEHOUSE_ROOT": f"s3a://{on_server}/lake", **on_s3.environment()})).store()
    assert [c.operation for c in store.history(table)] == ["WRITE", "MERGE", "WRITE", "WRITE"]
    assert store.snapshot(table).to_arrow(["id"]).num_rows == 105 and store.version(copy) is not None
    # Compacted and vacuumed where it is: the files the compaction replaced are found on the
    # server, sized, and deleted; the rows stay.
    compacted = store.optimize(spark, table)
    assert compacted.files_removed > 1 and compacted.files_added == 1
    vacuumed = store.vacuum(spark, table, retention=dt.timedelta(0), dry_run=False, readers=[])
    assert len(vacuumed.files) >= compacted.files_removed and vacuumed.bytes > 0
    on_server_store = ObjectStore(on_s3.endpoint_url, "us-east-1")
    assert all(not locate(f"{table}/{file}", on_server_store).exists() for file in vacuumed.files)
    assert store.snapshot(table).to_arrow(["id"]).num_rows == 105
    # The files are on the server, not on a local path named after the URL.
    assert (on_s3.base / on_server / "bronze" / "numbers" / "_delta_log").is_dir()
