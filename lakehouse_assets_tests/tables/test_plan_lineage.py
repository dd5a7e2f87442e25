"""Column lineage read from an extended explain: attributes followed through aliases to the
lakehouse tables the leaves read, as a stream (its path option) or in batch (its scan's files)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.tables.plan_lineage import lineage_from_plan, plan_lineage, table_of

ROOT = "/lake/" + "deep" * 40  # longer than Spark's default cut of a scan's location

EXPLAINED = f"""== Parsed Logical Plan ==
'Project ['device_id, 'name]

== Analyzed Logical Plan ==
device_id: bigint, name: string, hr: double, time: timestamp, n: bigint
~Project [device_id#6L, name#11, hr#13, time#14, n#15L]
+- ~Project [device_id#6L, name#11, (heartrate#9 + cast(1 as double)) AS hr#13, cast(from_unixtime(cast(time#8 as bigint), yyyy-MM-dd HH:mm:ss, Some(UTC)) as timestamp) AS time#14, n#15L]
   +- ~Join LeftOuter, (mrn#7L = mrn#10L)
      :- ~Join Inner, (device_id#6L = d#15L)
      :  :- ~SubqueryAlias a
      :  :  +- ~SubqueryAlias `delta:{ROOT}/bronze/recordings`
      :  :     +- StreamingRelation delta, [device_id#6L, mrn#7L, time#8, heartrate#9], name=<Unassigned>
      :  +- LocalRelation [d#15L, n#16L]
      +- SubqueryAlias b
         +- Relation [mrn#10L,name#11] parquet

== Optimized Logical Plan ==
~Project [device_id#6L]

== Physical Plan ==
AdaptiveSparkPlan isFinalPlan=false
+- *(1) Project [device_id#6L]
   +- BroadcastExchange HashedRelationBroadcastMode(List(input[0, bigint, false]),false), [plan_id=52]
      +- FileScan parquet [mrn#10L,name#11] Batched: true, DataFilters: [isnotnull(mrn#10L)], Format: Parquet, Location: InMemoryFileIndex(2 paths)[file:{ROOT}/silver/patients/20261125/part-0.parquet, file:{ROOT}/silver/patients/part-1.parquet], PartitionFilters: []
"""


def test_attributes_are_followed_through_aliases_to_the_tables_leaves_read() -> None:
    assert lineage_from_plan(EXPLAINED, ["device_id", "name", "hr", "time", "n"], ROOT) == {
        "device_id": [("bronze.recordings", "device_id")],
        "name": [("silver.patients", "name")],
        "hr": [("bronze.recordings", "heartrate")],
        "time": [("bronze.recordings", "time")],
        # n comes from a local relation, which is no table: left out, not guessed.
    }


def test_a_unions_column_reads_the_same_position_of_each_input_and_subqueries_are_not_inputs() -> None:
    explained = f"""== Analyzed Logical Plan ==
id: bigint, label: string
Project [id#1L, label#9]
+- Union false, false
   :- Project [id#1L, upper(name#2) AS label#9]
   :  +- Filter (id#1L > scalar-subquery#20 [])
   :     :  +- Aggregate [min(n#21L) AS m#22L]
   :     :     +- LocalRelation [n#21L]
   :     +- SubqueryAlias `delta:{ROOT}/silver/a`
   :        +- StreamingRelation delta, [id#1L, name#2], name=<Unassigned>
   +- Project [key#5L, note#6]
      +- SubqueryAlias `delta:{ROOT}/silver/b`
         +- StreamingRelation delta, [key#5L, note#6], name=<Unassigned>
"""
    assert lineage_from_plan(explained, ["id", "label"], ROOT) == {
        "id": [("silver.a", "id"), ("silver.b", "key")],
        "label": [("silver.a", "name"), ("silver.b", "note")],
    }


def test_a_plan_without_an_analyzed_section_gives_nothing() -> None:
    assert lineage_from_plan("== Physical Plan ==\nFileScan parquet [a#1]", ["a"], ROOT) == {}


def test_a_path_names_its_table_only_under_the_root_and_a_medallion_layer() -> None:
    assert table_of(f"file:{ROOT}/gold/daily/part-0.parquet", ROOT) == "gold.daily"
    assert table_of(f"file://{ROOT}/silver/patients", ROOT) == "silver.patients"
    assert table_of(f"{ROOT}/landing/recordings/a.json", ROOT) is None
    assert table_of("/elsewhere/silver/patients", ROOT) is None
    assert table_of(f"{ROOT}/silver", ROOT) is None


def test_a_batch_read_and_a_computed_column_on_this_engine(spark: SparkSession, tmp_path: Path) -> None:
    table = tmp_path / "lake" / "silver" / "people"
    spark.createDataFrame([(1, "Ann")], "id BIGINT, name STRING").write.parquet(str(table))
    people = spark.read.parquet(str(table))
    df = people.select((F.col("id") * 2).alias("twice"), F.upper("name").alias("name"), F.lit(1).alias("one"))
    assert plan_lineage(df, tmp_path / "lake") == {
        "twice": [("silver.people", "id")], "name": [("silver.people", "name")]}


def test_a_union_of_two_tables_on_this_engine(spark: SparkSession, tmp_path: Path) -> None:
    for name, row in (("a", (1, "Ann")), ("b", (2, "Bob"))):
        spark.createDataFrame([row], "id BIGINT, name STRING").write.parquet(str(tmp_path / "lake" / "silver" / name))
    a, b = (spark.read.parquet(str(tmp_path / "lake" / "silver" / name)) for name in ("a", "b"))
    df = a.union(b.select((F.col("id") + 10).alias("id"), "name"))
    assert plan_lineage(df, tmp_path / "lake") == {
        "id": [("silver.a", "id"), ("silver.b", "id")], "name": [("silver.a", "name"), ("silver.b", "name")]}
