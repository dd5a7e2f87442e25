"""Records landed twice, routed to the quarantine as duplicates: a routed table holds each record
once by its unique columns, and every later copy goes to the quarantine as ``duplicate``. The
table is the memory of what it holds (no state store), so a replayed batch decides the same;
``dropDuplicatesWithinWatermark`` would drop the copies instead (docs/quality.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.ingestion.columns import INGESTED_AT_COLUMN, SOURCE_FILE_COLUMN
from lakehouse_assets.storage.merge import in_range_of

#: The quarantine reason of a copy of a record the table holds.
DUPLICATE = "duplicate"
#: Commit metadata of a routed table's batch: how many copies it sent to the quarantine.
DUPLICATES_KEY = "lakehouse.batch.duplicates"

_COPY = "__lakehouse_copy"
_HELD = "__lakehouse_held"


def mark_duplicates(routed: DataFrame, reason: str, unique_by: Sequence[str], held: DataFrame | None) -> DataFrame:
    """``routed`` (rows with their quarantine ``reason`` column, null where they pass) with
    ``reason`` set to ``duplicate`` on passing rows whose ``unique_by`` values are in ``held``
    (the table's rows, or None for no table) or on an earlier passing row of the batch."""
    missing = [c for c in unique_by if c not in routed.columns]
    if missing:
        raise LakehouseError(f"Cannot find duplicates by {list(unique_by)}: the rows lack {missing} "
                             f"(they have {routed.columns})")
    passing = F.col(reason).isNull()
    # The copy ingested first, then the one from the first file by name, then by value: an
    # order that does not depend on how Spark split the batch, so a replay keeps the same copy.
    landing = [c for c in (INGESTED_AT_COLUMN, SOURCE_FILE_COLUMN) if c in routed.columns]
    first_copy = Window.partitionBy(*unique_by).orderBy(
        *landing, *[c for c in routed.columns if c != reason and c not in landing])
    marked = routed.withColumn(_COPY, F.when(passing, F.row_number().over(first_copy)))
    is_copy: Column = F.col(_COPY) > 1
    if held is not None:
        keys = in_range_of(held.select(*unique_by), routed.where(passing), unique_by).distinct()
        keys = keys.select(*[F.col(c).alias(f"{_HELD}{c}") for c in unique_by], F.lit(True).alias(_HELD))
        on = reduce(lambda a, b: a & b, [marked[c].eqNullSafe(keys[f"{_HELD}{c}"]) for c in unique_by])
        marked = marked.join(keys, on, "left").drop(*[f"{_HELD}{c}" for c in unique_by])
        is_copy = is_copy | F.col(_HELD).isNotNull()
    marked = marked.withColumn(reason, F.when(passing & is_copy, F.lit(DUPLICATE)).otherwise(F.col(reason)))
    return marked.drop(_COPY, _HELD)
