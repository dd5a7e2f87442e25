"""How a table is laid out: the Delta properties, partition columns or clustering columns its
definition declares, given to the table when it is created and, for properties and clustering,
later (docs/guides/add-a-source.md, "Table layout", says why some tables are created first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.readwriter import DataFrameWriter
from pyspark.sql.streaming.readwriter import DataStreamWriter

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.storage._schema import type_sql
from lakehouse_assets.storage.merge import quote

#: The writer feature a clustered table's protocol names.
_CLUSTERING_FEATURE = "clustering"

Writer = TypeVar("Writer", DataFrameWriter, DataStreamWriter)


@dataclass(frozen=True)
class TableLayout:
    """The layout a table's definition declares: Delta table ``properties``, and either the
    columns it is ``partitioned_by`` (Hive-style folders) or those it is ``clustered_by``
    (Delta's liquid clustering), not both."""

    properties: Mapping[str, str] = field(default_factory=dict)
    partitioned_by: tuple[str, ...] = ()
    clustered_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.partitioned_by and self.clustered_by:
            raise LakehouseError(
                f"A table is declared both partitioned by {list(self.partitioned_by)} and clustered by "
                f"{list(self.clustered_by)}: Delta allows one or the other; keep one of the two.")

    def creating(self, writer: Writer) -> Writer:
        """``writer``, the one that creates the table, given the properties and partitioning."""
        if self.properties:
            writer = writer.options(**self.properties)
        return self.overwriting(writer)

    def overwriting(self, writer: Writer) -> Writer:
        """``writer``, one that overwrites the table, given its partitioning to keep."""
        return writer.partitionBy(*self.partitioned_by) if self.partitioned_by else writer


def create_table(spark: SparkSession, path: str, schema: T.StructType, layout: TableLayout) -> None:
    """Create the table at ``path`` with ``schema`` and ``layout``, and no rows (``CREATE TABLE``)."""
    columns = ", ".join(f"{quote(f.name)} {type_sql(f.dataType)}" for f in schema.fields)
    statement = f"CREATE TABLE IF NOT EXISTS {table_ref(path)} ({columns}) USING delta"
    if layout.partitioned_by:
        statement += f" PARTITIONED BY ({', '.join(quote(c) for c in layout.partitioned_by)})"
    if layout.clustered_by:
        statement += f" CLUSTER BY ({', '.join(quote(c) for c in layout.clustered_by)})"
    if layout.properties:
        statement += f" TBLPROPERTIES ({_pairs(layout.properties)})"
    spark.sql(statement)


def recluster(spark: SparkSession, path: str, layout: TableLayout) -> None:
    """Give the table at ``path`` its clustering columns back after an overwrite dropped them."""
    spark.sql(f"ALTER TABLE {table_ref(path)} CLUSTER BY ({', '.join(quote(c) for c in layout.clustered_by)})")


def fit_layout(spark: SparkSession, path: str, table: DeltaTable, layout: TableLayout) -> None:
    """Give the existing table at ``path`` the properties and clustering ``layout`` declares
    that it lacks; raise :class:`~lakehouse_assets.errors.LakehouseError` when its partition
    columns are not the declared ones."""
    metadata = table.metadata()
    partitioned_by = tuple(metadata.partition_columns)
    if partitioned_by != layout.partitioned_by:
        raise LakehouseError(
            f"Delta table {path} is partitioned by {list(partitioned_by)}, but its definition declares "
            f"{list(layout.partitioned_by)}: partitioning changes only with a rebuild. Rebuild the table "
            "with a full refresh (run config full_refresh: true, or `lakehouse reset <layer.table>`), "
            "or declare the partitioning it has.")
    current = metadata.configuration or {}
    missing = {k: v for k, v in layout.properties.items() if str(current.get(k)).lower() != str(v).lower()}
    if missing:
        spark.sql(f"ALTER TABLE {table_ref(path)} SET TBLPROPERTIES ({_pairs(missing)})")
    clustered = _CLUSTERING_FEATURE in (table.protocol().writer_features or [])
    if layout.clustered_by or clustered:
        current_clustering = tuple(_clustering_columns(spark, path)) if clustered else ()
        if current_clustering != layout.clustered_by:
            clustering = f"({', '.join(quote(c) for c in layout.clustered_by)})" if layout.clustered_by else "NONE"
            spark.sql(f"ALTER TABLE {table_ref(path)} CLUSTER BY {clustering}")


def _clustering_columns(spark: SparkSession, path: str) -> list[str]:
    """The table's clustering columns, as Delta reports them (``DESCRIBE DETAIL``)."""
    row = spark.sql(f"DESCRIBE DETAIL {table_ref(path)}").select("clusteringColumns").first()
    return list(row[0] or []) if row is not None else []


def _pairs(properties: Mapping[str, str]) -> str:
    return ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())


def table_ref(path: str) -> str:
    """A path table in SQL: ``delta.`<path>```."""
    return f"delta.{quote(path)}"
