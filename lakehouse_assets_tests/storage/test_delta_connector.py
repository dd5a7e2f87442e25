"""Delta Lake's own connector is in every session the project builds: its jars (resolved by
`make install`, checked against jars/SHA256SUMS), its SQL extension and its catalog."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.settings import DEFAULT_DELTA_JARS, DELTA_JAR_SUMS
from lakehouse_assets.spark_conf import delta_jars


def test_delta_reads_the_stores_tables_and_writes_tables_delta_rs_opens(spark, settings, store):
    path = str(settings.table_path("silver", "people"))
    store.write(spark.createDataFrame([(1, "Ann"), (2, "Bo")], "id BIGINT, name STRING"), path, mode="overwrite")
    store.write(spark.createDataFrame([(3, "Cy")], "id BIGINT, name STRING"), path, mode="append")

    read = spark.read.format("delta").load(path)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version").collect()

    assert sorted(tuple(row) for row in read.collect()) == [(1, "Ann"), (2, "Bo"), (3, "Cy")]
    assert sorted(row.version for row in history) == [0, 1]

    written = str(settings.table_path("gold", "counts"))
    spark.range(4).write.format("delta").save(written)
    engines = [row.engineInfo for row in spark.sql(f"DESCRIBE HISTORY delta.`{written}`").collect()]

    assert DeltaTable(written).to_pyarrow_table().num_rows == 4  # a standard table another reader opens
    assert all("Delta-Lake" in engine for engine in engines), engines


def test_string_columns_are_stored_as_plain_strings_other_readers_open(spark, settings, store):
    # Over Spark Connect a cast to StringType() or a Python UDF's string result carries an
    # explicit UTF8_BINARY collation, which Delta would store as a type delta-rs refuses.
    path = str(settings.table_path("silver", "strings"))
    label = F.udf(lambda n: f"n{n}", T.StringType())
    df = spark.range(2).select(
        F.col("id"),
        F.col("id").cast(T.StringType()).alias("cast"),
        label("id").alias("udf"),
        F.array(F.col("id").cast(T.StringType())).alias("nested"),
    )
    store.write(df, path, mode="overwrite")
    store.merge(df.withColumn("added", label("id")), path, keys=["id"], merge_schema=True)

    table = DeltaTable(path)
    assert "collate" not in table.schema().to_json()
    rows = table.to_pyarrow_table()
    assert rows.column_names == ["id", "cast", "udf", "nested", "added"]
    assert sorted(rows.column("added").to_pylist()) == ["n0", "n1"]


@pytest.fixture
def jars(tmp_path: Path) -> Path:
    copy = tmp_path / "jars"
    shutil.copytree(DEFAULT_DELTA_JARS, copy)
    return copy


def test_the_jars_make_install_resolved_match_their_sums(jars):
    assert {path.name for path in delta_jars(jars)} == {
        line.split()[1] for line in DELTA_JAR_SUMS.read_text().splitlines() if line.strip()}


def test_an_altered_jar_stops_the_driver_naming_make_install(jars):
    victim = sorted(jars.glob("delta-spark*.jar"))[0]
    victim.write_bytes(victim.read_bytes()[:-1])

    with pytest.raises(ConfigurationError, match=f"do not match jars/SHA256SUMS \\({victim.name}\\).*make install"):
        delta_jars(jars)


def test_a_missing_jar_stops_the_driver_naming_make_install(jars):
    (jars / "delta-storage-4.4.0.jar").unlink()

    with pytest.raises(ConfigurationError, match="missing .*delta-storage-4.4.0.jar.*make install"):
        delta_jars(jars)
