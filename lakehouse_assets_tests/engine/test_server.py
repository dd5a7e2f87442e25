"""The managed engine's lifecycle, on one real Spark Connect server started for this module.

Clients run in subprocesses: PySpark's Connect mode is process-wide, and the rest of the suite
shares an embedded session in this process. The tests that use the engine run in file order,
stop last.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from benchmarks.engine import SessionLog
from lakehouse_assets.cli import main
from lakehouse_assets.engine.files import EngineFiles
from lakehouse_assets.engine.probe import listening
from lakehouse_assets.engine.server import (
    ENGINE_MARKER,
    EngineStatus,
    engine_processes,
    engine_status,
    start_engine,
    stop_engine,
)
from lakehouse_assets.errors import EngineStartError
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.conftest import SMALL_DATA_CONF, TEST_JVM_OPTIONS
from lakehouse_assets_tests.engine.crash import kill_engine
from lakehouse_assets_tests.ports import free_port

# Short-lived test JVM, as in the suite's embedded session: less CPU spent warming up.
# Stopped queries are let go after 2 s (checked every second) instead of the engine's default
# minute; idle-worker monitors left by stopped queries are ended every second, not every 30 s.
ENGINE_CONF = {**SMALL_DATA_CONF,
               "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
               "spark.lakehouse.engine.stoppedQueryRetention": "2s",
               "spark.lakehouse.engine.queryCachePolling": "1s",
               "spark.lakehouse.engine.monitorReapInterval": "1s"}
CLIENT_TIMEOUT_SECONDS = 120

# A Dagster run on the engine at argv[1] (of the lakehouse at argv[2], its engine's port
# argv[3]) whose engine is killed after a table's step, before its contract checks' step:
# prints the kill, then each failed step's errors, outermost first.
CHECKS_AFTER_THE_ENGINE_DIES = textwrap.dedent("""
    import sys
    import dagster as dg
    from lakehouse_assets.quality import silver
    from lakehouse_assets.quality.checks import contract_checks
    from lakehouse_assets.settings import LakehouseSettings
    from lakehouse_assets.resource import LakehouseResource
    from lakehouse_assets_tests.engine.crash import kill_engine
    url, root, port = sys.argv[1:]
    settings = LakehouseSettings.from_env({"LAKEHOUSE_ROOT": root, "LAKEHOUSE_ENGINE_PORT": port})

    @dg.asset(key=["silver", "recordings_enriched"])
    def engine_dies_after_this_step(lakehouse: LakehouseResource) -> None:
        assert lakehouse.spark_session.range(3).count() == 3
        print("killed", kill_engine(settings), flush=True)

    run = dg.materialize([engine_dies_after_this_step, contract_checks(silver.RECORDINGS_ENRICHED)],
                         resources={"lakehouse": LakehouseResource(root=root, engine_url=url)}, raise_on_error=False)
    for event in run.all_events:
        if event.event_type is dg.DagsterEventType.STEP_FAILURE:
            error = event.step_failure_data.error
            while error is not None:
                print(event.step_key, " ".join(error.message.split()))
                error = error.cause
""")

# A client that runs one query on the engine at argv[1] and prints its answer.
COUNT_CLIENT = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    print(spark.range(3).count())
""")


@dataclass(frozen=True)
class Engine:
    settings: LakehouseSettings
    status: EngineStatus
    files: EngineFiles

    def url(self, token: str | None) -> str:
        return f"sc://localhost:{self.status.port}" + (f"/;token={token}" if token else "")



def _settings(root: Path, port: int, **extra: str) -> LakehouseSettings:
    return LakehouseSettings.from_env({"LAKEHOUSE_ROOT": str(root), "LAKEHOUSE_ENGINE_PORT": str(port),
                                       "LAKEHOUSE_SPARK_CONF": json.dumps(ENGINE_CONF), **extra})


def _client_env(**extra: str) -> dict[str, str]:
    """This environment without anything that would point a client at an engine."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("LAKEHOUSE_", "SPARK_REMOTE", "SPARK_CONNECT"))}
    return {**env, **extra}


def _run_client(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], env=env or _client_env(), capture_output=True,
                          text=True, timeout=CLIENT_TIMEOUT_SECONDS)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _descendants(pid: int) -> set[int]:
    """Every process whose parent chain leads to ``pid`` (read from /proc, independently of
    how the engine module finds its processes)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _running(pid: int, cmdline: str) -> bool:
    """``pid`` is alive, not a zombie, and still the program it was."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z" and _cmdline(pid) == cmdline


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    settings = _settings(tmp_path_factory.mktemp("engine_lakehouse"), free_port())
    status = start_engine(settings, timeout_seconds=120)
    try:
        yield Engine(settings, status, EngineFiles.of(settings))
    finally:
        stop_engine(settings)


# --- without a server ---------------------------------------------------------------------------

def test_a_taken_port_is_named(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        settings = _settings(tmp_path, port)
        with pytest.raises(EngineStartError, match=rf"Port {port} .*LAKEHOUSE_ENGINE_PORT"):
            start_engine(settings)
    files = EngineFiles.of(settings)
    assert not files.token.exists() and not files.state.exists()


def test_missing_java_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    settings = _settings(tmp_path, free_port())
    with pytest.raises(EngineStartError, match="sudo apt-get install -y openjdk-17-jre-headless"):
        start_engine(settings)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(EngineStartError, match="JAVA_HOME"):
        start_engine(settings)
    assert not EngineFiles.of(settings).token.exists()


def test_a_reused_pid_is_not_taken_for_the_engine(tmp_path: Path) -> None:
    settings = _settings(tmp_path, free_port())
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        EngineFiles.of(settings).write_state({"pid": bystander.pid, "port": settings.engine_port, "ready": True})
        status = engine_status(settings)
        assert not status.running and not status.answering and "not running" in status.message
        assert kill_engine(settings) is None
        assert stop_engine(settings) is False
        assert bystander.poll() is None, "stop signalled a process that is not the engine"
        assert not EngineFiles.of(settings).state.exists()
    finally:
        bystander.kill()
        bystander.wait()


def test_nothing_running_is_reported_and_stopping_it_is_fine(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    settings = _settings(tmp_path, free_port())
    assert not engine_status(settings).running
    assert stop_engine(settings) is False
    assert main(["engine", "status", "--root", str(tmp_path)]) == 1
    assert "no engine is running" in capsys.readouterr().out.lower()


def _processes_naming(text: str) -> list[str]:
    return [cmdline for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and text in (cmdline := _cmdline(int(entry.name)))]


@pytest.mark.slow
def test_a_server_that_dies_while_starting_is_reported_with_its_log(tmp_path: Path) -> None:
    settings = _settings(tmp_path, free_port(), LAKEHOUSE_SPARK_CONF=json.dumps({"spark.driver.memory": "lots"}))
    with pytest.raises(EngineStartError, match=r"exited with code \d+ while starting(.|\n)*-Xmxlots"):
        start_engine(settings, timeout_seconds=60)
    files = EngineFiles.of(settings)
    assert not files.state.exists() and not files.token.exists() and not files.properties.exists()


@pytest.mark.slow
def test_a_server_that_does_not_answer_in_time_is_stopped(tmp_path: Path) -> None:
    settings = _settings(tmp_path, free_port())
    files = EngineFiles.of(settings)
    with pytest.raises(EngineStartError, match="did not answer .* within 1 s"):
        start_engine(settings, timeout_seconds=1)
    assert not _processes_naming(str(files.properties)), "the server outlived its failed start"
    assert not files.state.exists() and not files.token.exists()


# --- on one engine ------------------------------------------------------------------------------

@pytest.mark.slow
def test_start_is_idempotent(engine: Engine) -> None:
    assert engine.status.running and engine.status.answering
    again = start_engine(engine.settings)
    assert (again.pid, again.answering) == (engine.status.pid, True)
    # Asking the engine did not switch this process into Spark Connect mode.
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ and "SPARK_REMOTE" not in os.environ


@pytest.mark.slow
def test_status_answers(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    status = engine_status(engine.settings)
    assert (status.running, status.answering, status.pid) == (True, True, engine.status.pid)
    assert status.url == f"sc://localhost:{engine.status.port}"
    assert main(["engine", "status", "--json", "--root", str(engine.settings.root)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["answering"], shown["pid"], shown["url"]) == (True, engine.status.pid, status.url)


@pytest.mark.slow
def test_the_token_stays_private(engine: Engine) -> None:
    files = engine.files
    token = files.read_token()
    assert token and len(token) >= 40
    for path in (files.token, files.properties, files.state):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert f"spark.connect.authenticate.token={token}" in files.properties.read_text()
    for pid in {engine.status.pid, *_descendants(engine.status.pid)}:
        assert token not in _cmdline(pid), f"the token shows in the command line of pid {pid}"
    assert token not in files.log.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_a_client_without_the_token_is_refused(engine: Engine, token: str | None) -> None:
    refused = _run_client(COUNT_CLIENT, engine.url(token))
    assert refused.returncode != 0
    assert "UNAUTHENTICATED" in refused.stderr, refused.stderr[-2000:]


@pytest.mark.slow
def test_a_run_session_of_the_engine_runs_queries(engine: Engine) -> None:
    # As a run builds it: the URL carries no token, the client reads it from _engine/token.
    code = textwrap.dedent("""
        import json
        from pyspark.sql.functions import udf
        from lakehouse_assets.settings import LakehouseSettings
        from lakehouse_assets.spark import build_spark_session
        from lakehouse_assets.spark_conf import is_connect_session
        spark = build_spark_session(LakehouseSettings.from_env(), new_session=True)
        plus_one = udf(lambda x: x + 1, "long")  # a Python UDF: the engine starts Python workers
        total = spark.range(10).select(plus_one("id").alias("n")).groupBy().sum("n").first()[0]
        print(json.dumps({"connect": is_connect_session(spark), "total": total,
                          "partitions": spark.conf.get("spark.sql.shuffle.partitions"),
                          "tz": spark.conf.get("spark.sql.session.timeZone")}))
    """)
    env = _client_env(LAKEHOUSE_ROOT=str(engine.settings.root), LAKEHOUSE_ENGINE_PORT=str(engine.status.port),
                      LAKEHOUSE_SPARK_REMOTE=engine.status.url)
    result = _run_client(code, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer == {"connect": True, "total": 55, "partitions": "2", "tz": "UTC"}


# A run's worth of streaming queries over Delta's streaming source, each in a session of its own.
STREAMING_CLIENT = textwrap.dedent("""
    import sys
    from pyspark.sql import functions as F
    from lakehouse_assets.engine.client import close_session
    from lakehouse_assets.settings import LakehouseSettings
    from lakehouse_assets.spark import build_spark_session
    table, sessions = sys.argv[1], int(sys.argv[2])
    for number in range(sessions):
        spark = build_spark_session(LakehouseSettings.from_env(), new_session=True)
        spark.range(1).selectExpr(f"{number} AS x").write.format("delta").mode("append").save(table)
        doubled = F.udf(lambda x: x * 2, "bigint")
        query = (spark.readStream.format("delta").load(table).select(doubled("x")).writeStream.format("noop")
                 .option("checkpointLocation", table + "_checkpoint").trigger(availableNow=True).start())
        query.awaitTermination()
        close_session(spark)
    print("ok")
""")


def _live_instances(pid: int, class_name: str) -> int:
    """Instances of ``class_name`` left in the JVM ``pid`` after a full GC (``jcmd``'s histogram)."""
    histogram = subprocess.run(["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True,
                               timeout=60, check=True).stdout
    return sum(int(line.split()[1]) for line in histogram.splitlines() if line.endswith(" " + class_name))


def _threads_named(pid: int, prefix: str) -> int:
    """Threads of process ``pid`` whose name (as Linux keeps it: 15 characters) starts with ``prefix``."""
    count = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            count += (task / "comm").read_text().startswith(prefix)
    return count


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("jcmd") is None, reason="needs the JDK's jcmd to count the engine's objects")
def test_query_after_query_the_engine_keeps_no_python_workers_monitors_or_stopped_queries(engine: Engine) -> None:
    """What a warm engine grew by, run after run, each gone: a Python daemon per query (with
    per-session artifact isolation), an idle-worker monitor thread per query (each query's
    Python streaming-source runner makes a worker factory whose monitor Spark never ends:
    ~5 threads a run), and each stopped query with its last plan and session clone, which
    Spark Connect alone keeps for an hour (~10 MiB of heap a run). One run of a query, then
    a run of four: the engine holds no more of any of them than after the first."""
    env = _client_env(LAKEHOUSE_ROOT=str(engine.settings.root), LAKEHOUSE_ENGINE_PORT=str(engine.status.port),
                      LAKEHOUSE_SPARK_REMOTE=engine.status.url)
    table = str(Path(engine.settings.root) / "many_queries")
    pid = engine.status.pid
    assert pid is not None

    def python_workers() -> list[str]:
        """PySpark's daemons (and their forked workers) that run the queries' Python UDFs."""
        return [_cmdline(process) for process in engine_processes(engine.settings)
                if "pyspark.daemon" in _cmdline(process)]

    result = _run_client(STREAMING_CLIENT, table, "1", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    time.sleep(3)
    after_one, monitors_after_one = python_workers(), _threads_named(pid, "Idle Worker Mon")
    result = _run_client(STREAMING_CLIENT, table, "4", env=env)
    assert result.returncode == 0, result.stderr[-3000:]

    after_five = python_workers()
    assert 0 < len(after_five) <= len(after_one), (after_one, after_five)
    # Monitors are reaped every second here (the engine's default: 30 s).
    deadline = time.monotonic() + 20
    while (monitors := _threads_named(pid, "Idle Worker Mon")) > monitors_after_one and time.monotonic() < deadline:
        time.sleep(1)
    assert monitors <= monitors_after_one, f"{monitors - monitors_after_one} more idle-worker monitor threads"
    assert "sleep interrupted" not in engine.files.log.read_text(errors="replace"), "monitors end quietly"
    # Retention 2 s, polled every second: on a quiet machine they are gone within 5 s. CI's
    # embedded pass runs beside the Connect pass on 2 cores, where one was still held at 30 s.
    query_class = "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution"
    deadline = time.monotonic() + 90
    while (left := _live_instances(pid, query_class)) and time.monotonic() < deadline:
        time.sleep(2)
    assert left == 0, f"{left} stopped queries still held by the engine 90 s after they stopped"


TABLE_CLIENT = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    print(spark.sql("SELECT count(*) FROM bronze.engine_catalog_probe").first()[0])
""")


@pytest.mark.slow
def test_cli_start_on_a_running_engine_says_where_and_names_the_tables_for_any_client(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_deltalake(str(Path(engine.settings.table_path("bronze", "engine_catalog_probe"))), pa.table({"id": [1, 2, 3]}))
    monkeypatch.setenv("LAKEHOUSE_ENGINE_PORT", str(engine.status.port))
    assert main(["engine", "start", "--root", str(engine.settings.root)]) == 0
    out = capsys.readouterr().out
    # A plain Spark Connect client, nothing of this project's, reads the table by name.
    read = _run_client(TABLE_CLIENT, engine.url(engine.files.read_token()))
    assert read.returncode == 0 and read.stdout.split()[-1] == "3", read.stderr[-3000:]
    assert "already runs" in out and f"pid {engine.status.pid}" in out
    assert f"export LAKEHOUSE_SPARK_REMOTE=sc://localhost:{engine.status.port}" in out
    assert str(engine.files.token) in out and str(engine.files.log) in out
    assert engine.files.read_token() not in out


def _command(*argv: str, root: Path) -> subprocess.CompletedProcess[str]:
    """`lakehouse ARGV` as a user types it: no engine named in the environment."""
    return subprocess.run([sys.executable, "-m", "lakehouse_assets.cli", *argv, "--root", str(root)],
                          env=_client_env(), capture_output=True, text=True, timeout=CLIENT_TIMEOUT_SECONDS)


@pytest.mark.slow
def test_commands_use_the_running_engine_unless_told_embedded(engine: Engine) -> None:
    root = engine.settings.root
    # A setting only the engine's driver has: read back, it says which Spark answered.
    probe = "SET spark.lakehouse.engine.stoppedQueryRetention"
    sessions = SessionLog(engine.files.log)
    sessions.counts()
    earlier = sessions.seen | sessions.closed  # sessions of the tests before this one

    on_engine = _command("sql", probe, "--format", "json", root=root)
    assert on_engine.returncode == 0, on_engine.stderr[-3000:]
    assert json.loads(on_engine.stdout)[0]["value"] == "2s"
    assert f"on the lakehouse's running Spark Connect engine at sc://localhost:{engine.status.port}" in on_engine.stderr
    verified = _command("verify", root=root)
    assert verified.returncode == 0 and "running Spark Connect engine" in verified.stderr, verified.stderr[-3000:]
    # Each command released its session as it exited, not left it to the engine's idle timeout.
    sessions.counts()
    theirs = (sessions.seen | sessions.closed) - earlier
    assert theirs and theirs <= sessions.closed, f"left open: {theirs - sessions.closed}"

    embedded = _command("sql", probe, "--format", "json", "--embedded", root=root)
    assert embedded.returncode == 0, embedded.stderr[-3000:]
    assert json.loads(embedded.stdout)[0]["value"] == "<undefined>"
    # Spark's and the JVM's own output go to the lakehouse's Spark log, not the terminal.
    assert embedded.stderr == "", embedded.stderr[-3000:]
    assert "log4j" in (root / "_logs" / "spark.log").read_text()


@pytest.mark.slow
def test_a_killed_engine_is_reported_and_started_anew(engine: Engine) -> None:
    killed = engine_status(engine.settings).pid
    assert killed is not None
    command = _cmdline(killed)
    # The engine dies in the middle of a Dagster run (in a process of its own: a Connect
    # session would turn this one's pyspark to Connect), between a table's step and its
    # contract checks' step: the checks, which find the run's session dead, fail naming it.
    table = Path(engine.settings.table_path("silver", "recordings_enriched"))
    write_deltalake(str(table), pa.table({"patient_id": [1, 2], "heartrate": [70.0, 80.0]}))
    run = _run_client(CHECKS_AFTER_THE_ENGINE_DIES, engine.url(engine.files.read_token()),
                      str(engine.settings.root), str(engine.status.port))
    printed = run.stdout.splitlines()
    assert f"killed {killed}" in printed, run.stderr[-3000:]
    failures = [line for line in printed if not line.startswith("killed")]
    assert failures and all(line.startswith("silver_recordings_enriched_contract ") for line in failures), printed
    message = "\n".join(failures)
    assert f"No Spark engine answers at sc://localhost:{engine.status.port}" in message, message
    assert "lakehouse engine status" in message and "token" not in message, message
    deadline = time.monotonic() + 10
    while _running(killed, command):
        assert time.monotonic() < deadline, "the engine outlived SIGKILL"
        time.sleep(0.1)
    status = engine_status(engine.settings)
    assert (status.running, status.answering, status.pid) == (False, False, killed)
    assert engine.files.token.exists()  # a crash cleans nothing up
    restarted = start_engine(engine.settings, timeout_seconds=120)
    assert restarted.answering and restarted.pid != killed


@pytest.mark.slow
def test_stop_leaves_no_engine_process_or_python_worker(engine: Engine, tmp_path: Path) -> None:
    # A Python worker busy in a UDF that ignores SIGHUP, which is how PySpark's daemon tells
    # its workers to go: it outlives the daemon unless stop ends it.
    stubborn_client = textwrap.dedent("""
        import sys
        from pyspark.sql import SparkSession
        from pyspark.sql.functions import udf
        started = sys.argv[2]
        def stubborn(x):
            import signal, time
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            open(started, "w").close()
            time.sleep(600)
            return x
        spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
        spark.range(1).select(udf(stubborn, "long")("id")).collect()
    """)
    server = engine_status(engine.settings).pid
    assert server is not None
    started = tmp_path / "udf-started"
    client = subprocess.Popen(
        [sys.executable, "-c", stubborn_client, engine.url(engine.files.read_token()), str(started)],
        env=_client_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            if client.poll() is not None:
                pytest.fail(f"the client failed: {client.communicate()[1][-2000:]}")
            assert time.monotonic() < deadline, "the UDF did not start within 60 s"
            time.sleep(0.2)
        workers = {pid: _cmdline(pid) for pid in _descendants(server) if "pyspark" in _cmdline(pid)}
        assert len(workers) >= 2, f"expected PySpark's daemon and a worker under the engine: {workers}"
        processes = {server: _cmdline(server), **workers}

        assert stop_engine(engine.settings, timeout_seconds=30) is True
    finally:
        client.kill()
        client.wait()

    left = [f"{pid}: {cmdline[:120]}" for pid, cmdline in processes.items() if _running(pid, cmdline)]
    assert not left, f"processes of the engine outlived stop: {left}"
    marker = f"{ENGINE_MARKER}={engine.files.folder}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                assert marker not in (entry / "environ").read_bytes().split(b"\0"), _cmdline(int(entry.name))
            except OSError:
                continue
    assert not listening(engine.status.port)
    assert not engine.files.state.exists() and not engine.files.token.exists()
    assert not engine.files.properties.exists() and engine.files.log.exists()
    assert stop_engine(engine.settings) is False


@pytest.mark.slow
def test_status_after_stop_fails(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "status", "--root", str(engine.settings.root)]) == 1
    assert "no engine is running" in capsys.readouterr().out.lower()
