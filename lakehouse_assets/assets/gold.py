"""Gold: aggregates for reporting. The seeds' two are declared in SQL as their cells read
(``sql/*.sql``); the windowed heart rate, with its watermark, in Python; and the log of
changes to the current patients, streamed from that table's change data feed.

The seeds' two are streaming tables whose queries group at their top level. Each runs its
query as it is in output mode ``update``, Spark keeping the groups in the query's checkpoint,
and each micro-batch's changed groups are merged into the table by the columns it groups by
(:func:`~lakehouse_assets.tables.sql_aggregate.group_keys`), not rewritten whole.
Their upstream assets, column lineage and column descriptions come from their SQL. The
Python tables declare their column lineage; their column descriptions come from their
contracts (``quality/gold.py``). The Python form of the same table, for comparison (README,
"Adding a table"), is rewritten whole in complete mode::

    @table_asset(layer="gold", ins={"recordings": stream_from(["silver", "recordings_enriched"])},
                 output_mode="complete", automation_condition=downstream_of_new_data())
    def daily_patient_avg(recordings: DataFrame) -> DataFrame:
        return (recordings.groupBy("mrn", "name", F.date_trunc("DD", "time").alias("date"))
                .agg(F.mean("heartrate").alias("avg_heartrate")))
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.assets.automation import downstream_of_new_data
from lakehouse_assets.assets.sql_asset import SQL_FOLDER, sql_asset
from lakehouse_assets.assets.table_asset import stream_from, table_asset
from lakehouse_assets.quality import gold as contracts
from lakehouse_assets.spec import ColumnSource
from lakehouse_assets.storage import StreamOptions

#: How late a recording may arrive, in event time, and still count in its window.
HEARTRATE_WATERMARK = "10 minutes"
HEARTRATE_WINDOW = "5 minutes"
_ENRICHED = "silver.recordings_enriched"

daily_patient_avg = sql_asset(SQL_FOLDER / "daily_patient_avg.sql")
device_counts = sql_asset(SQL_FOLDER / "device_counts.sql")
#: The Pandera contracts checked on these tables after each materialization.
CONTRACTS = (contracts.DAILY_PATIENT_AVG, contracts.DEVICE_COUNTS)


@table_asset(layer="gold", ins={"recordings": stream_from(["silver", "recordings_enriched"])},
             output_mode="append", automation_condition=downstream_of_new_data(),
             columns=contracts.HEARTRATE_5MIN.described_columns(),
             column_lineage={
                 "device_id": [ColumnSource(_ENRICHED, "device_id")],
                 **{column: [ColumnSource(_ENRICHED, "time")] for column in ("window_start", "window_end")},
                 **{column: [ColumnSource(_ENRICHED, "heartrate")]
                    for column in ("recordings", "min_heartrate", "mean_heartrate", "max_heartrate")},
             })
def heartrate_5min(recordings: DataFrame) -> DataFrame:
    """Heart rate per device in 5-minute tumbling windows: count, min, mean and max. A window
    is written once, when the watermark (the newest recording's time less 10 minutes) has
    passed its end; recordings later than that are dropped, and each run counts them in its
    `rows_dropped_by_watermark`."""
    return (recordings.withWatermark("time", HEARTRATE_WATERMARK)
            .groupBy("device_id", F.window("time", HEARTRATE_WINDOW))
            .agg(F.count("heartrate").alias("recordings"), F.min("heartrate").alias("min_heartrate"),
                 F.mean("heartrate").alias("mean_heartrate"), F.max("heartrate").alias("max_heartrate"))
            .select("device_id", F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "recordings", "min_heartrate", "mean_heartrate", "max_heartrate"))


@table_asset(layer="gold", automation_condition=downstream_of_new_data(),
             columns=contracts.PATIENT_CHANGES.described_columns(),
             # The change, its version and time come from the feed's own columns, not a table's.
             column_lineage={column: [ColumnSource("silver.patients_current", column)] for column in ("mrn", "name")},
             ins={"changes": stream_from(["silver", "patients_current"], StreamOptions(read_change_feed=True))})
def patient_changes(changes: DataFrame) -> DataFrame:
    """Every change made to silver.patients_current, read from its change data feed: the
    patient (mrn, name: the name after an insert or update, the last one before a delete), the
    `change` (insert, update or delete), and the `patients_version` and `changed_at` of the
    commit that made it."""
    return (changes.filter(F.col("_change_type") != "update_preimage")
            .select("mrn", "name",
                    F.regexp_replace("_change_type", "_postimage$", "").alias("change"),
                    F.col("_commit_version").alias("patients_version"),
                    F.col("_commit_timestamp").alias("changed_at")))
