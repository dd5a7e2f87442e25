"""A checkpoint converted from the old Delta source's positions resumes in Delta's own source:
the rows committed after it are read once, none of those read before again."""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.storage._delta_log import snapshot_files
from lakehouse_assets.storage.checkpoint_upgrade import upgrade_checkpoint


def _run(spark: SparkSession, source: str, sink: str, checkpoint: str) -> None:
    query = (spark.readStream.format("delta").load(source).writeStream.format("delta")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(sink))
    query.awaitTermination()


def test_delta_resumes_from_a_converted_checkpoint_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    source, sink, checkpoint = (str(tmp_path / name) for name in ("bronze", "silver", "checkpoint"))
    spark.range(0, 3).write.format("delta").save(source)
    spark.range(3, 5).write.format("delta").mode("append").save(source)
    _run(spark, source, sink, checkpoint)
    # What the old source logged for that batch: the snapshot of version 1, every file read.
    files = snapshot_files(source, 1)
    legacy = {"version": 1, "index": len(files) - 1, "snapshot": True, "table": source,
              "tableId": DeltaTable(source).metadata().id}
    offsets = Path(checkpoint, "offsets", "0")
    lines = offsets.read_text().splitlines()
    offsets.write_text("\n".join([*lines[:2], json.dumps(legacy)]))
    Path(checkpoint, "offsets", ".0.crc").unlink(missing_ok=True)
    spark.range(5, 7).write.format("delta").mode("append").save(source)

    result = upgrade_checkpoint(checkpoint)
    _run(spark, source, sink, checkpoint)

    assert result.batches_converted == (0,)
    assert sorted(row.id for row in spark.read.format("delta").load(sink).collect()) == list(range(7))
