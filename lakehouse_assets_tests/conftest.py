"""Shared fixtures: one SparkSession for the whole test session, and a temporary lakehouse."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

from lakehouse_assets.settings import LakehouseSettings, ObjectStore
from lakehouse_assets.spark import build_spark_session
from lakehouse_assets.spark_conf import is_connect_session
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets_tests.built import BuiltLakehouse, build_lakehouse
from lakehouse_assets_tests.s3_server import ACCESS_KEY, SECRET_KEY, S3Server, s3_server

#: Every JVM the tests start (the test session's, the Connect pass's engine, runs, children): the C1
#: compiler alone, a code cache it does not fill, and the serial GC. In the test session's JVM over ten
#: test files (CPU by thread, 2026-12-07), C2's compiler threads took 140 of its 394 CPU seconds;
#: with C1 alone the rest ran about a quarter slower, but the JVM took 351 in all (29 compiling). With
#: the default code cache C1 filled it and the sweeper thread took a sixth of the JVM's CPU.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m -XX:+UseSerialGC"
#: Spark settings for the tests' tiny data, in the test session and every engine, run and child
#: the tests start. Delta's state in one partition, as local masters have it: the cluster's
#: engine (no local defaults) rebuilt every table's state in 50, a shuffle of 50 tasks on the
#: worker per write. Expressions evaluated, not generated as Java and compiled: on rows this
#: few, generating the code costs more than running it (in a profile of a warm one-file
#: increment, a fifth of the JVM's samples were Spark's code formatter stripping comments from
#: generated projections; interpreted, the increment took 15% less wall and JVM CPU, and the
#: AUTO CDC and aggregate sink tests 13% less wall). Interpreted, Spark cannot decode
#: spark.catalog.listTables()'s rows: the project lists by SQL (SHOW VIEWS), and so do the tests.
SMALL_DATA_CONF = {"spark.sql.shuffle.partitions": "2", "spark.databricks.delta.snapshotPartitions": "1",
                   "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One real S3-API server (s3proxy on loopback) for the session's object-storage tests."""
    with s3_server(tmp_path_factory.mktemp("s3") / "data") as running:
        yield running


@pytest.fixture
def on_s3(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The server, with the AWS variables its user would set in the environment for the test."""
    for name, value in s3.environment().items():
        monkeypatch.setenv(name, value)
    return s3


@pytest.fixture
def spark_on_s3(spark: SparkSession, on_s3: S3Server) -> Iterator[S3Server]:
    """The server, with the shared session reaching it as a session built from the object
    store's settings would (S3A reads its settings when it first opens a bucket), with the
    test credentials the environment gives."""
    conf = {**ObjectStore(on_s3.endpoint_url, "us-east-1").hadoop_conf(),
            "fs.s3a.access.key": ACCESS_KEY, "fs.s3a.secret.key": SECRET_KEY}
    # The session catalog makes a schema's folder (CREATE SCHEMA ... LOCATION, as lakehouse
    # verify's gold check registers the tables) with the Hadoop settings the session's shared
    # state copied from the context at its start, not with the session's: an embedded session is
    # given both, as a session started with them has them.
    hadoop = None if is_connect_session(spark) else spark._jsparkSession.sharedState().hadoopConf()
    before = {key: hadoop.get(key) for key in conf} if hadoop is not None else {}
    for key, value in conf.items():
        spark.conf.set(key, value)
        if hadoop is not None:
            hadoop.set(key, value)
    try:
        yield on_s3
    finally:
        for key in conf:
            spark.conf.unset(key)
            if hadoop is not None and before[key] is not None:
                hadoop.set(key, before[key])
            elif hadoop is not None:
                hadoop.unset(key)


@pytest.fixture
def store_settings(spark_on_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> LakehouseSettings:
    """A fresh, empty lakehouse on the tests' S3 server (``s3a://<new bucket>/lake``), also
    exported as ``LAKEHOUSE_ROOT``, with the shared session reaching it."""
    root = f"s3a://{spark_on_s3.bucket(f'lake-{uuid.uuid4().hex[:12]}')}/lake"
    monkeypatch.setenv("LAKEHOUSE_ROOT", root)
    return LakehouseSettings.from_env(dict(os.environ))


@pytest.fixture(scope="session")
def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lakehouse_session")


@pytest.fixture(scope="session")
def spark(session_root: Path) -> Iterator[SparkSession]:
    """The test session's one SparkSession (a JVM start costs seconds)."""
    # LAKEHOUSE_SPARK_REMOTE runs the whole suite on a Spark Connect engine instead.
    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(session_root),
                                           "LAKEHOUSE_SPARK_REMOTE": os.environ.get("LAKEHOUSE_SPARK_REMOTE", "")})
    session = build_spark_session(settings, app_name="lakehouse_assets_tests",
                                  extra_conf={**SMALL_DATA_CONF,
                                              "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
                                              # One JVM makes hundreds of Delta tables over the session,
                                              # and Delta keeps each table's log and state cached: 1 GiB
                                              # ran out in CI late in the suite (a run makes a handful).
                                              "spark.driver.memory": "2g"})
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@contextmanager
def spark_jobs(spark: SparkSession) -> Iterator[list[int]]:
    """The ids of the Spark jobs the block starts from this thread (an embedded session),
    filled in when it ends."""
    group = f"counted-{uuid.uuid4().hex}"
    context = spark.sparkContext
    context.setJobGroup(group, "jobs counted by a test")
    jobs: list[int] = []
    try:
        yield jobs
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        jobs.extend(context.statusTracker().getJobIdsForGroup(group))


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LakehouseSettings:
    """A fresh, empty lakehouse root for one test, also exported as ``LAKEHOUSE_ROOT``."""
    root = tmp_path / "lakehouse"
    root.mkdir()
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(root))
    return LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(root)})


@pytest.fixture(scope="session")
def built_once(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> BuiltLakehouse:
    """The reference lakehouse this worker built (see :mod:`lakehouse_assets_tests.built`)."""
    return build_lakehouse(tmp_path_factory.mktemp("built"))


@pytest.fixture
def built(built_once: BuiltLakehouse, monkeypatch: pytest.MonkeyPatch) -> BuiltLakehouse:
    """The reference lakehouse as built, a copy of its own for this test (change it at will),
    also exported as ``LAKEHOUSE_ROOT``."""
    built_once.restore()
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(built_once.root))
    return built_once


@pytest.fixture(scope="session")
def store() -> DeltaTableStore:
    return DeltaTableStore()


def pytest_configure(config: pytest.Config) -> None:
    # Spark's Python workers must run this interpreter even before the first session starts.
    os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)
    interrupt_as_python_does()


def interrupt_as_python_does() -> None:
    """SIGINT raises KeyboardInterrupt in the test process, as in a terminal, also when it was
    started as a background job (with SIGINT ignored: the Connect pass, CI). Every in-process
    Dagster run sets SIGTERM to SIGINT's handler when it ends (``capture_interrupts``): with
    SIGINT ignored, SIGTERM was then ignored too, and so in every process the tests start
    after it (an ignored signal survives exec). A ``make run`` script started so could not
    trap SIGTERM, and dagster dev never stopped (e2e/test_land_to_gold's 25 s deadline); a
    JVM does not handle a signal it starts with ignored."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


#: The files that take longest (each minutes on 2 cores, measured with --durations), longest
#: first. Scheduling only: they start first, as the workers come free, so that none of them is
#: what the pass waits for at its end.
LONGEST_FILES = (
    "reliability/test_crash_recovery.py",
    "engine/test_cluster.py",
    "cdc/test_auto_cdc_sink.py",
    "pipelines/test_lakeflow_examples.py",
    "reliability/test_invariants.py",
    "reliability/test_checkpoint_repair.py",
    "engine/test_server.py",
    "pipelines/test_export_sdp_run.py",
)
#: The test files using the reference lakehouse (fixture ``built``): one worker takes them all
#: (:class:`ReferenceLakehouseScheduling`) and builds it once. A build is two Materialize alls,
#: minutes on 2 cores beside the rest of the suite, and a second worker cannot use the first
#: one's: the bronze checkpoints name the lakehouse's absolute path, and each worker changes its
#: copy at will. A file that starts using it belongs here (collection stops until it is).
REFERENCE_LAKEHOUSE_FILES = (
    "assets/test_column_metadata.py",
    "assets/test_materialize_all.py",
    "assets/test_quarantine.py",
    "assets/test_routed_subset.py",
    "engine/test_cluster.py",
    "io/test_event_log.py",
    "io/test_replay.py",
    "pipelines/test_export_sdp_run.py",
    "pipelines/test_lakeflow_examples.py",
    "quality/test_freshness.py",
    "reliability/test_bad_input_pipeline.py",
    "reliability/test_checkpoint_repair.py",
    "reliability/test_crash_recovery.py",
    "reliability/test_crash_recovery_declared.py",
    "reliability/test_full_refresh_during_automation.py",
    "reliability/test_invariants.py",
    "reliability/test_provenance.py",
    "test_docs.py",
)
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, then the other files holding slow tests, each file's tests in
    their own order: the two test workers of ``make test`` take whole files (in this order,
    with ``--no-loadscope-reorder``), and a long file handed out last would leave one worker
    idle while the other finishes it."""
    rank = {HERE / name: position for position, name in enumerate(LONGEST_FILES)}
    listed = {HERE / name for name in (*LONGEST_FILES, *REFERENCE_LAKEHOUSE_FILES)}
    missing = sorted(str(path) for path in listed if not path.exists())
    assert not missing, f"LONGEST_FILES or REFERENCE_LAKEHOUSE_FILES name files that are gone: {missing}"
    using = {item.path for item in items if "built_once" in getattr(item, "fixturenames", ())}
    unlisted = sorted(str(path.relative_to(HERE)) for path in using - {HERE / n for n in REFERENCE_LAKEHOUSE_FILES})
    assert not unlisted, f"these files use the reference lakehouse: add them to REFERENCE_LAKEHOUSE_FILES: {unlisted}"
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: (rank.get(item.path, len(rank)), item.path not in slow_files))


class ReferenceLakehouseScheduling(LoadScopeScheduling):
    """Whole files to the workers as they come free (as ``--dist loadfile``), the files of
    ``REFERENCE_LAKEHOUSE_FILES`` together as one."""

    GROUP = "the reference lakehouse's files"

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        tests = HERE.relative_to(config.rootpath).as_posix()
        self._together = {f"{tests}/{name}" for name in REFERENCE_LAKEHOUSE_FILES}

    def _split_scope(self, nodeid: str) -> str:
        file = nodeid.split("::", 1)[0]
        return self.GROUP if file in self._together else file


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadScopeScheduling | None:
    """``--dist loadfile`` (``make test``) as :class:`ReferenceLakehouseScheduling`."""
    if config.getvalue("dist") != "loadfile":
        return None
    return ReferenceLakehouseScheduling(config, log)
