"""The engine's driver program: Spark Connect's own server, with stopped queries let go sooner.

``spark-submit`` runs this file as the engine's Python driver; it talks to the driver JVM through
the Py4J gateway ``spark-submit`` opens and imports neither pyspark nor the project. Before the
server starts it shortens the server's stopped-query cache (an hour, hard-coded in Spark 4.2),
and it ends the idle-worker monitor threads Spark leaves behind, both by reflection
(docs/engines.md, "A long-lived engine"). If Spark's internals move, the server starts anyway
with Spark's behaviour and says so in the engine's log.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from py4j.java_gateway import GatewayParameters, JavaGateway, JVMView
from py4j.protocol import Py4JError

# The Scala object holding the server's stopped-query cache (``streamingSessionManager``).
SERVICE_OBJECT = "org.apache.spark.sql.connect.service.SparkConnectService$"
CACHE_FIELDS = {
    "stoppedQueryInactivityTimeout": ("spark.lakehouse.engine.stoppedQueryRetention", "60s"),
    "sessionPollingPeriod": ("spark.lakehouse.engine.queryCachePolling", "10s"),
}


def shorten_query_retention(jvm: JVMView) -> str:
    """Set the Connect server's stopped-query cache to the engine's settings; return what was done."""
    conf = jvm.org.apache.spark.SparkConf()  # spark-submit's settings
    service = jvm.java.lang.Class.forName(SERVICE_OBJECT).getField("MODULE$").get(None)
    cache = service.streamingSessionManager()
    seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
    done = []
    for field_name, (key, default) in CACHE_FIELDS.items():
        value = jvm.org.apache.spark.network.util.JavaUtils.timeStringAsSec(conf.get(key, default))
        field = cache.getClass().getDeclaredField(field_name)
        field.setAccessible(True)
        field.set(cache, jvm.scala.concurrent.duration.Duration.create(value, seconds))
        done.append(f"{field_name}={value}s")
    return ", ".join(done)


MONITOR_THREAD_CLASS = "org.apache.spark.api.python.PythonWorkerFactory$MonitorThread"
REAP_INTERVAL = ("spark.lakehouse.engine.monitorReapInterval", "30s")


def end_orphan_monitors(jvm: JVMView) -> int:
    """End the idle-worker monitor threads of Python worker factories that SparkEnv does not
    pool and that run no daemon; return how many were ended."""
    env = jvm.org.apache.spark.SparkEnv.get()
    # Still starting; or a handler is set for uncaught exceptions (Spark's executors may exit on
    # one), and ending a thread goes through it.
    if env is None or jvm.java.lang.Thread.getDefaultUncaughtExceptionHandler() is not None:
        return 0
    identity = jvm.java.lang.System.identityHashCode
    pool_field = env.getClass().getDeclaredField("pythonWorkers")
    pool_field.setAccessible(True)
    pooled = set()
    factories = pool_field.get(env).values().iterator()
    while factories.hasNext():
        pooled.add(identity(factories.next()))
    ended = 0
    for thread in jvm.java.lang.Thread.getAllStackTraces().keySet():
        if thread.getClass().getName() != MONITOR_THREAD_CLASS:
            continue
        factory = thread.getClass().getField("$outer").get(thread)
        daemon_field = factory.getClass().getDeclaredField("daemon")
        daemon_field.setAccessible(True)
        if identity(factory) in pooled or daemon_field.get(factory) is not None:
            continue
        _end(thread)
        ended += 1
    return ended


def _end(thread: Any) -> None:
    """End a monitor thread: ``stop()`` ends it with a ThreadDeath, which the JVM drops quietly;
    Java 20 and later refuse it, and an interrupt ends it too (the JVM prints its trace)."""
    try:
        thread.stop()
    except Py4JError:
        thread.interrupt()


def _end_orphan_monitors_forever(gateway: JavaGateway, interval_seconds: float) -> None:
    jvm = gateway.jvm
    while True:
        time.sleep(interval_seconds)
        try:
            end_orphan_monitors(jvm)
        except Exception as exc:  # noqa: BLE001 - a round that fails (a pool changing under it) is retried
            print(f"lakehouse engine: could not end idle-worker monitors this round: {exc}", flush=True)


def main() -> int:
    gateway = JavaGateway(gateway_parameters=GatewayParameters(
        port=int(os.environ["PYSPARK_GATEWAY_PORT"]), auth_token=os.environ["PYSPARK_GATEWAY_SECRET"],
        auto_convert=True))
    jvm = gateway.jvm
    try:
        print(f"lakehouse engine: stopped-query cache set ({shorten_query_retention(jvm)})", flush=True)
    except Exception as exc:  # noqa: BLE001 - the server must start even where Spark's internals moved
        print(f"lakehouse engine: WARNING: stopped streaming queries stay cached for Spark's default hour "
              f"(could not set the cache: {exc})", flush=True)
    interval = jvm.org.apache.spark.network.util.JavaUtils.timeStringAsSec(
        jvm.org.apache.spark.SparkConf().get(*REAP_INTERVAL))
    threading.Thread(target=_end_orphan_monitors_forever, args=(gateway, float(interval)),
                     name="end-orphan-monitors", daemon=True).start()
    # Blocks until the server ends; the JVM exits when this process does.
    jvm.org.apache.spark.sql.connect.service.SparkConnectServer.main(gateway.new_array(jvm.java.lang.String, 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
