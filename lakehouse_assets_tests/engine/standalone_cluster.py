"""A Spark standalone cluster on loopback, started from the installed pyspark: one master and
one worker, for tests that run the lakehouse on a real cluster.

Like the daemons of a real cluster, they do not inherit the credentials of whoever starts them
(this process's ``AWS_*`` variables): the worker is given its own environment
(``worker_env``), as a deployment gives its workers theirs (``conf/spark-env.sh``, or an
instance role). The executors it starts inherit it; that is how they reach object storage with
credentials that never enter an application's Spark settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.spark_conf import archive_options
from lakehouse_assets_tests.conftest import TEST_JVM_OPTIONS
from lakehouse_assets_tests.ports import free_port

START_TIMEOUT_SECONDS = 90


class StandaloneCluster:
    """``with StandaloneCluster(folder) as cluster:`` starts a master and a worker on
    127.0.0.1 and stops both (whole process groups) on the way out; ``cluster.master_url``
    is what a driver's ``--master`` takes. ``worker_env``: variables of the worker's own
    environment, which its executors inherit (the AWS credentials of a lakehouse on object
    storage)."""

    def __init__(self, folder: Path, *, worker_cores: int = 2, worker_memory: str = "2g",
                 worker_env: Mapping[str, str] | None = None) -> None:
        self.folder = folder
        self.worker_env = dict(worker_env or {})
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.port = free_port()
        self.webui_port = free_port()
        self._processes: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def __enter__(self) -> StandaloneCluster:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self._start("master", {}, "org.apache.spark.deploy.master.Master",
                        "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.webui_port))
            self._start("worker", self.worker_env, "org.apache.spark.deploy.worker.Worker", self.master_url,
                        "--host", "127.0.0.1", "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                        "--webui-port", str(free_port()), "--work-dir", str(self.folder / "work"))
            self._wait_for_worker()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for process in reversed(self._processes):
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self._processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def log(self, role: str) -> Path:
        return self.folder / f"{role}.log"

    def _start(self, role: str, own_env: Mapping[str, str], main_class: str, *args: str) -> None:
        from pyspark.find_spark_home import _find_spark_home

        spark_home = Path(_find_spark_home())
        inherited = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
        env = {**inherited, **own_env, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(self.folder),
               "SPARK_WORKER_DIR": str(self.folder / "work"),
               # The master and worker live as long as the test: short JVMs' options, and the
               # classes archived at install.
               "SPARK_DAEMON_JAVA_OPTS": archive_options(LakehouseSettings.from_env(), TEST_JVM_OPTIONS)}
        with self.log(role).open("wb") as log:
            self._processes.append(subprocess.Popen(
                [str(spark_home / "bin" / "spark-class"), main_class, *args], env=env, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.folder, start_new_session=True))

    def _wait_for_worker(self) -> None:
        """Until the master's status page lists one live worker."""
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            for role, process in zip(("master", "worker"), self._processes, strict=True):
                if process.poll() is not None:
                    raise RuntimeError(f"the Spark {role} exited with code {process.returncode}; see {self.log(role)}")
            with suppress(OSError, ValueError):
                with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=2) as response:
                    if json.load(response).get("aliveworkers", 0) >= 1:
                        return
            time.sleep(0.5)
        raise TimeoutError(f"no Spark worker registered with {self.master_url} within {START_TIMEOUT_SECONDS} s; "
                           f"see {self.log('master')} and {self.log('worker')}")

