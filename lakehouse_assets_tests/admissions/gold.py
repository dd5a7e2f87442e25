"""Gold: admissions and mean length of stay per ward, in Python; admissions per ward and day,
in SQL."""

from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.assets.automation import downstream_of_new_data
from lakehouse_assets.assets.sql_asset import sql_asset
from lakehouse_assets.assets.table_asset import stream_from, table_asset
from lakehouse_assets.quality.contract import DescribedColumn


@table_asset(layer="gold", ins={"admissions": stream_from(["silver", "admissions_clean"])},
             output_mode="complete", automation_condition=downstream_of_new_data(),
             columns=[DescribedColumn("ward", "The ward", "string"),
                      DescribedColumn("admissions", "Admissions to the ward", "bigint"),
                      DescribedColumn("mean_stay_hours", "Mean length of stay, in hours", "double")])
def ward_stays(admissions: DataFrame) -> DataFrame:
    """Per ward: how many admissions were discharged, and their mean length of stay."""
    return admissions.groupBy("ward").agg(F.count("*").alias("admissions"),
                                          F.mean("length_of_stay_hours").alias("mean_stay_hours"))


# The same source in SQL, grouped and kept incrementally (verify recomputes it in batch).
ward_days = sql_asset(Path(__file__).parent / "sql" / "ward_days.sql")
