"""An asset body's temporary views are its scratch space: the IO manager clears them once the
body's output is written, so no view one asset made is seen by the next asset or run.
"""

from __future__ import annotations

from pyspark.sql import SparkSession


def drop_temp_views(spark: SparkSession) -> list[str]:
    """Drop every temporary view of ``spark`` (global ones are not the session's); their names."""
    # SHOW VIEWS, not spark.catalog.listTables(): that one loads every table of the current
    # database, and its rows cannot be decoded where Spark interprets expressions
    # (spark.sql.codegen.factoryMode=NO_CODEGEN, as the tests run).
    names = [row.viewName for row in spark.sql("SHOW VIEWS").collect() if row.isTemporary]
    for name in names:
        spark.catalog.dropTempView(name)
    return names
