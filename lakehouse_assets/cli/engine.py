"""``lakehouse engine start|stop|status``: the warm local Spark Connect engine of a lakehouse,
thin commands over :mod:`lakehouse_assets.engine.server` (they print, the library does not)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from lakehouse_assets.cli.arguments import add_command, positive_seconds
from lakehouse_assets.cli.errors import EXIT_FAILURE, EXIT_OK, CommandError
from lakehouse_assets.cli.output import print_json
from lakehouse_assets.settings import DEFAULT_ENGINE_PORT, LakehouseSettings

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource

DESCRIPTION = """\
A long-lived Spark Connect server for this lakehouse, so that runs attach to a warm JVM
instead of starting their own (seconds instead of tens of seconds per run).

  start   start it on 127.0.0.1, port $LAKEHOUSE_ENGINE_PORT (default 15002), and wait until it
          answers (about 15-20 s); when it already runs, just say where
  stop    stop it and every Python worker it started
  status  say whether it runs and answers; exits 0 only when it answers

It serves only clients that send its token, kept in $LAKEHOUSE_ROOT/_engine/token (readable by
you only); runs of this lakehouse read it from there. Point runs at it with
LAKEHOUSE_SPARK_REMOTE=sc://localhost:PORT. Its log is $LAKEHOUSE_ROOT/_engine/engine.log.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``engine`` and its actions."""
    parser = add_command(subparsers, "engine", parents, None, "start, stop or check the local Spark Connect engine",
                         DESCRIPTION)
    actions = parser.add_subparsers(title="actions", metavar="ACTION", dest="action", required=True)
    summary = "start the engine, or say where it already runs"
    add_command(actions, "start", parents, run_start, summary, summary).add_argument(
        "--timeout", type=positive_seconds, default=180, metavar="SECONDS",
        help="how long to wait for the engine to answer (default 180)")
    summary = "stop the engine and its Python workers"
    add_command(actions, "stop", parents, run_stop, summary, summary).add_argument(
        "--timeout", type=positive_seconds, default=30, metavar="SECONDS",
        help="how long to let the engine shut down before killing it (default 30)")
    summary = "whether the engine runs and answers (exit 0 only when it answers)"
    add_command(actions, "status", parents, run_status, summary, summary, json=True)


def run_start(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Start the engine (or find it running) and say how to use it."""
    settings = lakehouse.settings()
    from lakehouse_assets.engine.files import EngineFiles
    from lakehouse_assets.engine.server import engine_status, start_engine

    was_answering = engine_status(settings).answering
    status = start_engine(settings, timeout_seconds=args.timeout)
    files = EngineFiles.of(settings)
    registered = _register_tables(settings, status.url, status.port)
    print(f"{'The Spark Connect engine already runs' if was_answering else 'Started the Spark Connect engine'}: "
          f"it answers at {status.url} (pid {status.pid}, since {status.started_at}).")
    print(f"  tables: {registered} in its catalog by name (layer.name), for any client attached to it")
    print(f"  token: {files.token} (readable by you only; runs of this lakehouse read it from there)")
    print(f"  log:   {status.log}")
    print("Run the lakehouse on it:")
    print(f"  export LAKEHOUSE_ROOT={settings.root}")
    if status.port != DEFAULT_ENGINE_PORT:
        print(f"  export LAKEHOUSE_ENGINE_PORT={status.port}")
    print(f"  export LAKEHOUSE_SPARK_REMOTE={status.url}")
    print("Stop it with `lakehouse engine stop`.")
    return EXIT_OK


def _register_tables(settings: LakehouseSettings, url: str, port: int) -> int:
    """Register the lakehouse's tables in the engine's catalog, which every session attached
    to it shares; how many there are. A `lakehouse sql` of its own does it, in a process of
    its own: a Spark Connect client turns its whole process into one."""
    import os
    import subprocess
    import sys

    from lakehouse_assets.storage.discovery import discover_tables

    env = {**os.environ, "LAKEHOUSE_ROOT": str(settings.root), "LAKEHOUSE_SPARK_REMOTE": url,
           "LAKEHOUSE_ENGINE_PORT": str(port)}
    done = subprocess.run([sys.executable, "-m", "lakehouse_assets.cli", "sql", "SHOW SCHEMAS", "--format", "json"],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CommandError(f"The engine started, but registering the lakehouse's tables in its catalog failed: "
                           f"{done.stderr.strip()[-2000:]}")
    return len(discover_tables(settings.root))


def run_stop(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Stop the engine; stopping a stopped engine is not an error."""
    settings = lakehouse.settings()
    from lakehouse_assets.engine.server import stop_engine

    if stop_engine(settings, timeout_seconds=args.timeout):
        print(f"Stopped the Spark Connect engine of {settings.root}.")
    else:
        print(f"No Spark Connect engine was running for {settings.root}.")
    return EXIT_OK


def run_status(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Print whether the engine runs and answers; 0 only when it answers."""
    settings = lakehouse.settings()
    from lakehouse_assets.engine.server import engine_status

    status = engine_status(settings)
    if args.json:
        print_json({"running": status.running, "answering": status.answering, "pid": status.pid,
                    "port": status.port, "url": status.url, "log": str(status.log),
                    "started_at": status.started_at, "message": status.message})
    else:
        print(status.message[:1].upper() + status.message[1:] + ".")
        if status.running:
            print(f"  log: {status.log}")
    return EXIT_OK if status.answering else EXIT_FAILURE
