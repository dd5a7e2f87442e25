"""Table assets declared in SQL files, Lakeflow's way (:mod:`lakehouse_assets.tables.sql_definition`).

One ``.sql`` file is one asset: its key is the table it creates, its upstream assets are the
tables its query reads, its column lineage is read from the query, its description is its
``COMMENT``. The body runs the query over the tables by name in the run's session; the IO
manager writes the result like any Python asset's, with the same metadata and checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dagster as dg
from pyspark.sql import DataFrame

from lakehouse_assets.assets.automation import downstream_of_new_data
from lakehouse_assets.assets.table_asset import ColumnSource, table_asset
from lakehouse_assets.spark import SparkResource
from lakehouse_assets.tables.sql_definition import SqlDefinitionError, SqlTableKind, parse_sql_definition
from lakehouse_assets.tables.sql_lineage import column_lineage

SQL_TEXT = "lakehouse/sql"


def sql_asset(path: Path) -> dg.AssetsDefinition:
    """The table asset the SQL file at ``path`` defines."""
    text = path.read_text(encoding="utf-8")
    definition = parse_sql_definition(text, source=str(path))
    layer, name = definition.table.split(".")
    reads = [table for table, _ in definition.reads]
    lineage = {
        column: [ColumnSource(table, source) for table, source in sources]
        for column, sources in column_lineage(definition.query, reads).items()
    }
    streaming = definition.kind is SqlTableKind.streaming_table

    @table_asset(
        layer=layer,
        name=name,
        description=definition.comment or f"{definition.kind} defined in {path.name}.",
        deps=[table.split(".") for table in reads],
        output_mode="complete" if definition.complete else "append",
        write_mode="overwrite",
        column_lineage=lineage or None,
        automation_condition=downstream_of_new_data(),
        metadata={SQL_TEXT: dg.MetadataValue.md(f"```sql\n{text.strip()}\n```"),
                  "lakehouse/sql_file": dg.MetadataValue.path(str(path))},
    )
    def _sql_table(spark: SparkResource) -> DataFrame:
        df = spark.tables.sql(definition.query)
        if df.isStreaming != streaming:  # the parse refuses this; a query Spark reads otherwise is caught here
            raise SqlDefinitionError(f"{path}: the query of {definition.table} does not read as a {definition.kind}")
        return df

    return _sql_table


def sql_assets(folder: Path) -> Sequence[dg.AssetsDefinition]:
    """One asset per ``.sql`` file in ``folder``, by file name."""
    return [sql_asset(path) for path in sorted(folder.glob("*.sql"))]
