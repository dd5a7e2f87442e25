"""Gold: aggregates for reporting, declared in SQL as the seeds' cells read (``sql/*.sql``).

Both are streaming tables whose queries group at their top level, so each is kept in complete
mode from its stream's state; their upstream assets and column lineage come from their SQL.
The Python form of the same table, for comparison (README, "Adding a table")::

    @table_asset(layer="gold", ins={"recordings": stream_from(["silver", "recordings_enriched"])},
                 output_mode="complete", automation_condition=downstream_of_new_data())
    def daily_patient_avg(recordings: DataFrame) -> DataFrame:
        return (recordings.groupBy("mrn", "name", F.date_trunc("DD", "time").alias("date"))
                .agg(F.mean("heartrate").alias("avg_heartrate")))
"""

from __future__ import annotations

from lakehouse_assets.assets.sql_asset import SQL_FOLDER, sql_asset

daily_patient_avg = sql_asset(SQL_FOLDER / "daily_patient_avg.sql")
device_counts = sql_asset(SQL_FOLDER / "device_counts.sql")
