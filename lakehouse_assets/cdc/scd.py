"""Applying a batch of changes to the rows they touch, as Spark DataFrames (executors only).

Both table types are computed per key from *events*: a change row is an upsert or a delete
(or a truncate, type 1) at a sequence value. Type 1 keeps, per key, the last event applied
(its sequence and whether it deleted the key: the tombstone that stops a late, older upsert
from bringing a deleted row back). Type 2 rebuilds the affected keys' history from the events
its rows stand for plus the batch's, in sequence order, so a late change slots into place.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_assets.cdc.spec import END_AT, START_AT, AutoCdc

# Columns of an event (beside the table's kept columns).
SEQ = "__lakehouse_sequence"
DELETE = "__lakehouse_delete"
TRUNCATE = "__lakehouse_truncate"
# Columns of a type 1 table's state: the last sequence applied to each key, and whether it
# deleted the key.
STATE_SEQUENCE = "__SEQUENCE"
STATE_DELETED = "__DELETED"


def column(name: str) -> Column:
    """A column by its exact name (back-quoted, so dots and spaces are not read as syntax)."""
    return F.col("`" + name.replace("`", "``") + "`")


def change_events(changes: DataFrame, spec: AutoCdc) -> DataFrame:
    """The feed's change rows as events: the kept columns, the sequence, delete and truncate flags."""
    kept = spec.kept_columns(changes.columns)
    delete = F.expr(spec.apply_as_deletes) if spec.apply_as_deletes else F.lit(False)
    truncate = F.expr(spec.apply_as_truncates) if spec.apply_as_truncates else F.lit(False)
    return changes.select(
        *[column(c) for c in kept],
        column(spec.sequence_by).alias(SEQ),
        F.coalesce(delete, F.lit(False)).alias(DELETE),
        F.coalesce(truncate, F.lit(False)).alias(TRUNCATE),
    )


def missing_identity(spec: AutoCdc) -> Column:
    """True for a change row (as the feed has it) that cannot be applied: no sequence value,
    or no key (a truncate needs none)."""
    no_key = reduce(lambda a, b: a | b, [column(c).isNull() for c in spec.keys])
    truncate = F.coalesce(F.expr(spec.apply_as_truncates), F.lit(False)) if spec.apply_as_truncates else F.lit(False)
    return column(spec.sequence_by).isNull() | (no_key & ~truncate)


# --- type 1 ------------------------------------------------------------------------------------

def scd1_effective(events: DataFrame, state: DataFrame | None, spec: AutoCdc,
                   truncated_at: object | None = None) -> DataFrame:
    """Per key, the batch's last event, kept only when it is newer than the one the state
    says was applied (a late change never overwrites a newer one, deletes included).

    ``truncated_at``: the sequence of the batch's last truncate, if any. Events before it are
    void, and every key of the state applied before it is deleted at it.
    """
    keys = list(spec.keys)
    events = events.filter(~column(TRUNCATE)).drop(TRUNCATE)
    if truncated_at is not None:
        events = events.filter(column(SEQ) > F.lit(truncated_at))
        if state is not None:
            at = F.lit(truncated_at).cast(events.schema[SEQ].dataType)
            wiped = (state.filter(~column(STATE_DELETED) & (column(STATE_SEQUENCE) < at))
                     .select(*[column(k) for k in keys], at.alias(SEQ), F.lit(True).alias(DELETE)))
            events = events.unionByName(wiped, allowMissingColumns=True)
    latest = Window.partitionBy(*[column(k) for k in keys]).orderBy(column(SEQ).desc(), column(DELETE).desc())
    last = events.withColumn("__rank", F.row_number().over(latest)).filter("__rank = 1").drop("__rank")
    if state is None:
        return last
    applied = state.select(*[column(k) for k in keys], column(STATE_SEQUENCE).alias("__applied"))
    return (last.join(applied, keys, "left")
            .filter(column("__applied").isNull() | (column(SEQ) > column("__applied"))).drop("__applied"))


def scd1_state_rows(effective: DataFrame, spec: AutoCdc) -> DataFrame:
    """The state rows the effective events leave: key, last sequence, deleted."""
    return effective.select(*[column(k) for k in spec.keys], column(SEQ).alias(STATE_SEQUENCE),
                            column(DELETE).alias(STATE_DELETED))


def scd1_table_rows(effective: DataFrame, kept: Sequence[str]) -> DataFrame:
    """The table rows the effective events leave: the upserted keys' new rows."""
    return effective.filter(~column(DELETE)).select(*[column(c) for c in kept])


# --- type 2 ------------------------------------------------------------------------------------

def scd2_state_rows(events: DataFrame) -> DataFrame:
    """Events as a type 2 table's state keeps them (its change log)."""
    return (events.drop(TRUNCATE).withColumnRenamed(SEQ, STATE_SEQUENCE)
            .withColumnRenamed(DELETE, STATE_DELETED))


def scd2_state_events(state: DataFrame) -> DataFrame:
    """A type 2 table's state rows as events again."""
    return state.withColumnRenamed(STATE_SEQUENCE, SEQ).withColumnRenamed(STATE_DELETED, DELETE)


def scd2_history(events: DataFrame, spec: AutoCdc, kept: Sequence[str], tracked: Sequence[str]) -> DataFrame:
    """Every version of the keys in ``events`` (all their events, applied and new), in
    sequence order: an upsert that changes a tracked column opens a version and closes the
    one before at its sequence; one that changes only other columns updates the version in
    place; a delete closes the current version."""
    keys = list(spec.keys)
    order = Window.partitionBy(*[column(k) for k in keys]).orderBy(column(SEQ))
    changed = [~column(c).eqNullSafe(F.lag(column(c)).over(order)) for c in tracked]
    previous_delete = F.lag(column(DELETE)).over(order)
    opens = ~column(DELETE) & (previous_delete.isNull() | previous_delete
                               | reduce(lambda a, b: a | b, changed, F.lit(False)))
    so_far = order.rowsBetween(Window.unboundedPreceding, 0)
    numbered = (events
                .withColumn("__next", F.lead(column(SEQ)).over(order))
                .withColumn("__version", F.sum(opens.cast("int")).over(so_far)))
    values = [c for c in kept if c not in keys]
    # The version's values are its last upsert's; it ends where the event after that one is.
    last = F.max_by(F.struct(*[column(c) for c in values], column("__next").alias("__next")), column(SEQ))
    versions = (numbered.filter(~column(DELETE))
                .groupBy(*[column(k) for k in keys], column("__version"))
                .agg(F.min(column(SEQ)).alias(START_AT), last.alias("__last")))
    return versions.select(*[column(k) for k in keys], *[column("__last")[c].alias(c) for c in values],
                           column(START_AT), column("__last")["__next"].alias(END_AT)
                           ).select(*[column(c) for c in kept], column(START_AT), column(END_AT))
