"""Spark's and Delta Lake's JVM classes, parsed once at install: a class-data sharing archive
(docs/configuration.md says what it saves). ``make install`` makes it (:func:`make_archive`);
``spark_conf.archive_options`` adds it to a driver's Java options when it is there, and a JVM
whose build or class path changed since starts as it would without it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from lakehouse_assets.settings import LakehouseSettings, class_archive_settings
from lakehouse_assets.spark_conf import ARCHIVE_NAME, archive_path


def make_archive(settings: LakehouseSettings) -> Path:
    """Start a local Spark driver that archives its classes at exit, give it a lakehouse's
    kind of work (a Delta write, an availableNow stream, a MERGE, a table's history), stop it
    and wait for the archive, then put it in place (replacing any earlier one at once)."""
    from delta.tables import DeltaTable

    from lakehouse_assets.spark import build_spark_session

    target = archive_path(settings)
    with tempfile.TemporaryDirectory(prefix="lakehouse-class-archive-") as work:
        partial = target.with_name(f".{ARCHIVE_NAME}.{os.getpid()}")  # same file system: replaced at once
        spark = build_spark_session(settings, app_name="lakehouse_class_archive", extra_conf={
            "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off,cds+dynamic=off"})
        jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
        landing, table = Path(work) / "landing", str(Path(work) / "table")
        landing.mkdir()
        (landing / "rows.json").write_text('{"id": 1, "value": "a"}\n{"id": 2, "value": "b"}\n')
        spark.range(3).selectExpr("id", "cast(id as string) as value").write.format("delta").save(table)
        query = (spark.readStream.schema("id long, value string").json(str(landing))
                 .writeStream.format("delta").option("checkpointLocation", str(Path(work) / "checkpoint"))
                 .trigger(availableNow=True).start(table))
        query.awaitTermination()
        changes = spark.createDataFrame([(2, "c"), (4, "d")], "id long, value string")
        (DeltaTable.forPath(spark, table).alias("t").merge(changes.alias("c"), "t.id = c.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        DeltaTable.forPath(spark, table).history().collect()
        spark.stop()
        # The JVM writes the archive as it exits, once this process lets go of it.
        jvm.stdin.close()
        jvm.wait(timeout=300)
        if not partial.is_file():  # pragma: no cover - a JVM without dynamic archives
            raise RuntimeError(f"the JVM wrote no class archive at {partial}; Java {os.environ.get('JAVA_HOME', '')} "
                               "may not support -XX:ArchiveClassesAtExit (JDK 13 or later does)")
        os.replace(partial, target)
    return target


def main() -> int:
    """``python -m lakehouse_assets.class_archive``: make the archive (``make install`` does)."""
    path = make_archive(class_archive_settings())
    print(f"Spark's classes archived for faster JVM starts: {path} ({path.stat().st_size // 2**20} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
