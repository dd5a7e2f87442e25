"""Table assets declared in SQL files, Lakeflow's way (:mod:`lakehouse_assets.tables.sql_definition`).

One ``.sql`` file is one asset: its key is the table it creates, its upstream assets are the
tables its query reads, its column lineage is read from the query, its description is its
``COMMENT``, its columns' descriptions are their comments (``name [type] COMMENT '...'`` in the
parentheses after its name), its expectations are its ``CONSTRAINT ... EXPECT`` clauses. A file
holding a streaming table and an ``AUTO CDC`` flow into it
(:mod:`lakehouse_assets.tables.sql_auto_cdc`) is an AUTO CDC table, as
:func:`~lakehouse_assets.assets.auto_cdc.auto_cdc_table` declares one in Python. The body runs the
query over the tables by name in the run's session; the IO manager writes the result like
any Python asset's, with the same metadata and checks. A table with a ``DROP ROW``
expectation gets a quarantine table beside it, ``<layer>.<name>_quarantine``, as a Python
routed table does: its one streamed table is the asset's input, read by the query as a view
(:mod:`lakehouse_assets.tables.sql_stream_view`), so the quarantine keeps each row as it came
(to trace it to where it landed, and for a quarantine replay to run the query on it again),
and the table keeps where each row landed (``_source_file``, ``_source_line``), as silver's does.
A streaming table whose query groups at its top level runs its query as it is in output mode
``update`` (Spark keeps the groups in the query's checkpoint), each batch's changed groups
merged into the table by the columns it groups by (:func:`~lakehouse_assets.tables.sql_aggregate.group_keys`);
one that cannot be merged so is rewritten whole, in complete mode, saying why.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.assets.auto_cdc import auto_cdc_table
from lakehouse_assets.assets.automation import downstream_of_new_data
from lakehouse_assets.assets.routed_table_asset import routed_table_asset
from lakehouse_assets.assets.table_asset import stream_from, table_asset
from lakehouse_assets.cdc import END_AT, START_AT
from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.outputs import RoutedRows
from lakehouse_assets.quality.contract import DescribedColumn
from lakehouse_assets.quality.rules import Rule, Severity, sql_rule
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.spec import ColumnSource
from lakehouse_assets.tables.sql_aggregate import NotKeyed, group_keys
from lakehouse_assets.tables.sql_auto_cdc import is_auto_cdc, parse_auto_cdc
from lakehouse_assets.tables.sql_definition import (
    OnViolation,
    SqlColumn,
    SqlConstraint,
    SqlDefinition,
    SqlDefinitionError,
    SqlTableKind,
    parse_sql_definition,
)
from lakehouse_assets.tables.sql_lineage import column_lineage
from lakehouse_assets.tables.sql_refs import batch_query
from lakehouse_assets.tables.sql_stream_view import SOURCE_ROW, over_stream_view

#: Where the project's own SQL definitions live.
SQL_FOLDER = Path(__file__).parent / "sql"
SQL_TEXT = "lakehouse/sql"
SQL_FILE = "lakehouse/sql_file"
QUARANTINE_SUFFIX = "_quarantine"

_SEVERITY = {OnViolation.warn: Severity.WARN, OnViolation.drop_row: Severity.ERROR,
             OnViolation.fail_update: Severity.FAIL}


def sql_asset(path: Path) -> dg.AssetsDefinition:
    """The table asset the SQL file at ``path`` defines."""
    text = path.read_text(encoding="utf-8")
    if is_auto_cdc(text):
        return _auto_cdc_asset(path, text)
    definition = parse_sql_definition(text, source=str(path))
    layer, name = definition.table.split(".")
    reads = [table for table, _ in definition.reads]
    lineage = {
        column: [ColumnSource(table, source) for table, source in sources]
        for column, sources in column_lineage(definition.query, reads).items()
    }
    rules = [expectation(c) for c in definition.constraints]
    common: dict[str, Any] = dict(
        layer=layer,
        column_lineage=lineage or None,
        columns=described(definition.columns),
        automation_condition=downstream_of_new_data(),
        expectations=rules,
        table_properties=dict(definition.properties),
        partitioned_by=definition.partitioned_by,
        clustered_by=definition.clustered_by,
        metadata={SQL_TEXT: dg.MetadataValue.md(f"```sql\n{text.strip()}\n```"),
                  SQL_FILE: dg.MetadataValue.path(str(path))},
    )
    streams_from = [table for table, streamed in definition.reads if streamed]
    description = definition.comment or f"{definition.kind} defined in {path.name}."

    def query(lakehouse: LakehouseResource) -> DataFrame:
        df = lakehouse.tables.sql(definition.query)
        if df.isStreaming != (definition.kind is SqlTableKind.streaming_table):
            # The parse refuses this; a query Spark reads otherwise is caught here.
            raise SqlDefinitionError(f"{path}: the query of {definition.table} does not read as a {definition.kind}")
        return df

    if any(rule.severity is Severity.ERROR for rule in rules):
        _check_can_drop(definition)
        streamed = over_stream_view(definition, f"_lakehouse_stream_{layer}__{name}")

        @routed_table_asset(
            name=name, quarantine_name=name + QUARANTINE_SUFFIX, description=description,
            quarantine_description=f"Rows of {streamed.stream} that {definition.table} dropped by its DROP ROW "
            "expectations, as they came (where they landed included), with the names of those they failed.",
            ins={"stream": stream_from(streamed.stream.split("."))},
            deps=[table.split(".") for table in reads if table != streamed.stream], **common)
        def _routed_sql_table(stream: DataFrame) -> RoutedRows:
            # The rows streamed in a run, or the quarantined ones a replay routes again; the tables
            # its query names are in the session's catalog (the run's resource, or the replay, put them there).
            stream.createOrReplaceTempView(streamed.view)
            return routed_sql_rows(stream.sparkSession.sql(streamed.query), stream.columns)

        return _routed_sql_table

    keys = _group_keys(definition) if definition.complete else None
    if isinstance(keys, str):
        common["metadata"] = {**common["metadata"], "incremental": f"No, rewritten whole: {keys}"}
    elif keys is not None:
        common["metadata"] = {**common["metadata"],
                              "incremental": "Yes: Spark keeps the groups in its checkpoint; each batch's changed "
                                             f"groups are merged by {', '.join(keys)}"}

        @table_asset(name=name, description=description, deps=[table.split(".") for table in reads],
                     output_mode="update", merge_keys=keys, streams_from=streams_from,
                     recomputed_by=batch_query(definition.query), **common)
        def _grouped_sql_table(lakehouse: LakehouseResource) -> DataFrame:
            return query(lakehouse)

        return _grouped_sql_table

    @table_asset(
        name=name, description=description, deps=[table.split(".") for table in reads],
        output_mode="complete" if definition.complete else "append", write_mode="overwrite",
        streams_from=streams_from, **common)
    def _sql_table(lakehouse: LakehouseResource) -> DataFrame:
        return query(lakehouse)

    return _sql_table


def routed_sql_rows(rows: DataFrame, streamed_columns: Sequence[str]) -> RoutedRows:
    """A routed SQL query's result (``rows``, with the streamed row as :data:`SOURCE_ROW`) as
    its two tables keep it: the table, the query's columns and where each row landed; the
    quarantine, the streamed row as it came (its ``streamed_columns``)."""
    selected = [c for c in rows.columns if c != SOURCE_ROW]
    named = {c.lower() for c in selected}
    landed = [c for c in (SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN) if c in streamed_columns and c.lower() not in named]
    return RoutedRows(rows=rows, passed_columns=[*selected, *[_streamed(c) for c in landed]],
                      quarantine_columns=[_streamed(c) for c in streamed_columns])


def _streamed(column: str) -> Column:
    return F.col(f"{SOURCE_ROW}.`{column.replace('`', '``')}`").alias(column)


def _group_keys(definition: SqlDefinition) -> list[str] | str:
    """The columns a grouped streaming table's changed groups are merged by, or why there are
    none (it is then rewritten whole, in complete mode)."""
    try:
        return [name for name, _ in group_keys(definition.query)]
    except NotKeyed as reason:
        return str(reason)


def _auto_cdc_asset(path: Path, text: str) -> dg.AssetsDefinition:
    cdc = parse_auto_cdc(text, source=str(path))
    layer, name = cdc.table.split(".")
    spec = cdc.spec

    @auto_cdc_table(
        layer=layer, name=name, description=cdc.comment or f"AUTO CDC table defined in {path.name}.",
        ins={"changes": stream_from(cdc.changes_from.split("."))},
        keys=spec.keys, sequence_by=spec.sequence_by, stored_as_scd_type=spec.stored_as_scd_type,
        apply_as_deletes=spec.apply_as_deletes, apply_as_truncates=spec.apply_as_truncates,
        except_column_list=spec.except_column_list, column_list=spec.column_list,
        track_history_column_list=spec.track_history_column_list,
        track_history_except_column_list=spec.track_history_except_column_list,
        automation_condition=downstream_of_new_data(),
        columns=described(cdc.columns),
        # AUTO CDC keeps the changes' columns as they are, by name.
        column_lineage={c.name: [ColumnSource(cdc.changes_from, c.name)] for c in cdc.columns
                        if c.name not in (START_AT, END_AT)} or None,
        table_properties=dict(cdc.properties),
        partitioned_by=cdc.partitioned_by,
        clustered_by=cdc.clustered_by,
        metadata={SQL_TEXT: dg.MetadataValue.md(f"```sql\n{text.strip()}\n```"),
                  SQL_FILE: dg.MetadataValue.path(str(path))},
    )
    def _auto_cdc_sql_table(changes: DataFrame) -> DataFrame:
        return changes

    return _auto_cdc_sql_table


def described(columns: Sequence[SqlColumn]) -> list[DescribedColumn]:
    """The columns a definition describes (``name [type] COMMENT '...'``)."""
    return [DescribedColumn(c.name, c.comment, c.type) for c in columns]


def expectation(constraint: SqlConstraint) -> Rule:
    """The rule a ``CONSTRAINT ... EXPECT`` declares."""
    action = "" if constraint.on_violation is OnViolation.warn else f" ON VIOLATION {constraint.on_violation}"
    return sql_rule(constraint.name, constraint.condition, columns=constraint.columns,
                    severity=_SEVERITY[constraint.on_violation],
                    description=f"EXPECT ({constraint.condition}){action}")


def sql_assets(folder: Path) -> Sequence[dg.AssetsDefinition]:
    """One asset per ``.sql`` file in ``folder``, by file name."""
    return [sql_asset(path) for path in sorted(folder.glob("*.sql"))]


def _check_can_drop(definition: SqlDefinition) -> None:
    """DROP ROW quarantines rows as they are appended; a table rewritten whole or by group cannot."""
    if definition.kind is SqlTableKind.materialized_view or definition.complete:
        dropping = [c.name for c in definition.constraints if c.on_violation is OnViolation.drop_row]
        raise SqlDefinitionError(
            f"{definition.source}: {definition.table} is rewritten on every update (a "
            f"{'materialized view' if definition.kind is SqlTableKind.materialized_view else 'grouped streaming table'}"
            f"), so its CONSTRAINTs {dropping} cannot DROP ROW into a quarantine that each rewrite would lose. "
            "Filter such rows in the query's WHERE, or use ON VIOLATION FAIL UPDATE, or no ON VIOLATION (warn).")
