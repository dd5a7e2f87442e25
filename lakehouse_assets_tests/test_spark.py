"""The SparkSession factory: correctness settings always hold, and workers run this interpreter.

These tests reuse the test session's one SparkSession (``build_spark_session`` hands back the
running session, as it does in a Dagster run) and leave its settings as they found them.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark import build_spark_session
from lakehouse_assets.spark_conf import REQUIRED_CONF, archive_options, archive_path, is_connect_session
from lakehouse_assets_tests.conftest import SMALL_DATA_CONF


def test_required_settings_hold_on_the_session(spark: SparkSession) -> None:
    for key, value in REQUIRED_CONF.items():
        if key.startswith("spark.hadoop."):
            assert spark.sparkContext.getConf().get(key) == value
        else:
            assert spark.conf.get(key) == value
    # the test fixture's extra_conf
    assert spark.conf.get("spark.sql.shuffle.partitions") == SMALL_DATA_CONF["spark.sql.shuffle.partitions"]


def test_a_python_udf_over_a_table_scan_returns(spark: SparkSession, tmp_path: Path) -> None:
    # pyspark 4.2.0's columnar Arrow UDF runner hangs its task forever (SPARK-58241): the
    # session runs Python UDFs pickled instead. Bounded here so that a hang fails the test.
    path = str(tmp_path / "numbers")
    spark.range(4).repartition(1).write.format("delta").save(path)
    doubled = F.udf(lambda n: n * 2, "bigint")
    pool = ThreadPoolExecutor(max_workers=1)
    rows = pool.submit(lambda: spark.read.format("delta").load(path).select(doubled("id")).collect())
    try:
        result = sorted(row[0] for row in rows.result(timeout=180))
    except FuturesTimeout:
        spark.sparkContext.cancelAllJobs()
        pytest.fail("a Python UDF over a Delta scan did not return in 180 s (the Arrow UDF hang)")
    finally:
        pool.shutdown(wait=False)
    assert result == [0, 2, 4, 6]


def test_workers_run_this_interpreter(spark: SparkSession) -> None:
    assert os.environ["PYSPARK_PYTHON"] == sys.executable

    def worker_python(_):
        import sys as worker_sys

        import deltalake  # only installed in this virtualenv

        return f"{worker_sys.executable}|{deltalake.__version__}"

    seen = spark.range(1).select(F.udf(worker_python, "string")("id").alias("w")).first().w
    executable, _ = seen.split("|")
    assert Path(executable).resolve() == Path(sys.executable).resolve()


def test_rebuilding_returns_the_running_session_with_its_settings_enforced(
    spark: SparkSession, tmp_path: Path
) -> None:
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        settings = LakehouseSettings.from_env({
            "LAKEHOUSE_ROOT": str(tmp_path),
            # Overrides the local default (4) ...
            "LAKEHOUSE_SPARK_CONF": '{"spark.sql.shuffle.partitions": "3", "spark.sql.session.timeZone": "Asia/Tokyo"}',
        })
        # ... and extra_conf overrides the settings; required settings override both.
        again = build_spark_session(settings, extra_conf={"spark.sql.shuffle.partitions": "2"})

        assert again is spark
        assert again.conf.get("spark.sql.session.timeZone") == "UTC"
        assert again.conf.get("spark.sql.shuffle.partitions") == "2"

        build_spark_session(settings)
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_settings_errors_surface_before_any_jvm_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from lakehouse_assets.errors import ConfigurationError

    monkeypatch.setenv("LAKEHOUSE_SPARK_CONF", "not json")
    with pytest.raises(ConfigurationError, match="LAKEHOUSE_SPARK_CONF"):
        build_spark_session(LakehouseSettings.from_env())


def test_a_session_built_on_another_thread_is_the_running_one_with_its_tuning(spark: SparkSession) -> None:
    import threading

    built: list[SparkSession] = []
    thread = threading.Thread(target=lambda: built.append(build_spark_session(LakehouseSettings.from_env({}))))
    thread.start()
    thread.join()

    assert built and built[0].sparkContext is spark.sparkContext
    # Not the local defaults (4): the test fixture's own setting holds.
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"


def test_the_session_jvm_maps_the_classes_archived_at_install(spark: SparkSession) -> None:
    """`make install` archives Spark's classes (lakehouse_assets.class_archive); a driver's
    JVM started through the factory maps that archive rather than parsing the jars again (the
    JVM silently does without an archive it cannot use, so only its memory map shows it)."""
    if is_connect_session(spark):
        pytest.skip("the engine's JVM is not this process's child")
    archive = archive_path(LakehouseSettings.from_env())
    assert archive.is_file(), f"no class archive at {archive}: `make install` makes it"
    jvm = spark.sparkContext._gateway.proc.pid
    assert str(archive) in Path(f"/proc/{jvm}/maps").read_text(), f"the session's JVM does not use {archive}"


def test_a_driver_s_own_class_sharing_choice_is_kept(tmp_path: Path) -> None:
    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(tmp_path), "LAKEHOUSE_DELTA_JARS": str(tmp_path)})
    assert archive_options(settings, "-Xmx1g") == "-Xmx1g"  # no archive there
    archive_path(settings).write_bytes(b"")
    assert archive_options(settings, "-Xmx1g").startswith(f"-Xmx1g -XX:SharedArchiveFile={archive_path(settings)} ")
    for own in ("-Xshare:off", "-XX:SharedArchiveFile=/elsewhere.jsa", "-XX:ArchiveClassesAtExit=/new.jsa"):
        assert archive_options(settings, own) == own
