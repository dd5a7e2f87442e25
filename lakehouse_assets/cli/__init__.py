"""The ``lakehouse`` command: land demo data and look after the lakehouse's tables, with thin
commands over the simulator, delta-rs, Delta Lake and the IO manager's full refresh. Each module
registers a few related subcommands (``add_parser``); heavy libraries are imported when one runs,
so ``--help`` and usage errors answer at once."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from lakehouse_assets.cli import engine, land, maintenance, project, reading, status
from lakehouse_assets.cli.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
)
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.settings import DEFAULT_ENGINE_PORT, DEFAULT_ROOT, LOGS_DIR, LakehouseSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["main", "build_parser"]

PROG = "lakehouse"
#: Where an embedded command's Spark writes its own log (under the root's _logs folder).
SPARK_LOG = "spark.log"

DESCRIPTION = """\
Land demo data into the lakehouse, inspect or reset its Delta tables, and run its local
Spark Connect engine.

TABLE arguments are layer.name, e.g. silver.recordings_enriched: letters, digits and
underscores, each part starting with a letter.
"""

EPILOG = f"""\
environment:
  LAKEHOUSE_ROOT          the lakehouse folder (default {DEFAULT_ROOT}); --root overrides it
  LAKEHOUSE_SPARK_REMOTE  run on a Spark Connect engine (sc://localhost:PORT); unset, commands
                          use the lakehouse's running engine (`lakehouse engine start`, or the
                          one `make run` starts), else an embedded Spark (--embedded: always)
  LAKEHOUSE_ENGINE_PORT   the port `{PROG} engine start` listens on (default {DEFAULT_ENGINE_PORT})

exit codes:
  {EXIT_OK}    success
  {EXIT_FAILURE}    failure: e.g. a missing table, a refused landing, a declined reset
  {EXIT_USAGE}    usage error: bad options or TABLE, or a reset without --yes and no terminal
  {EXIT_INTERRUPTED}  interrupted by Ctrl-C (land --continuous stops cleanly with 0 instead)

Run `{PROG} COMMAND --help` for the options of a command.
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``lakehouse`` and its subcommands."""
    # --root and --debug are accepted before or after the subcommand; SUPPRESS keeps a value
    # given before the subcommand from being reset by the subcommand's default.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", metavar="PATH", default=argparse.SUPPRESS,
                        help="the lakehouse folder (default: $LAKEHOUSE_ROOT, else ./lakehouse_data)")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show Python tracebacks of unexpected errors")
    common.add_argument("--embedded", action="store_true", default=argparse.SUPPRESS,
                        help="run Spark in this process even when the lakehouse's engine runs")
    common.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                        help=f"show Spark's own log on the terminal (else it goes to {LOGS_DIR}/{SPARK_LOG})")
    parser = argparse.ArgumentParser(
        prog=PROG, description=DESCRIPTION, epilog=EPILOG, parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    for module in (land, status, reading, maintenance, project, engine):
        module.add_parser(subparsers, parents=[common])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors and 0 for --help
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    debug = getattr(args, "debug", False)
    try:
        root = {"LAKEHOUSE_ROOT": args.root} if "root" in args else {}  # --root overrides the environment
        settings = LakehouseSettings.from_env({**os.environ, **root})
        if getattr(args, "spark", False):
            settings = _spark_settings(settings, embedded=getattr(args, "embedded", False),
                                       verbose=getattr(args, "verbose", False))
        # Imported here: Dagster and pyspark are heavy, and `lakehouse --help` needs neither.
        from lakehouse_assets.resource import LakehouseResource

        running = _engine_session()
        try:
            return int(args.run(args, LakehouseResource.from_settings(settings)))
        finally:
            _release_engine_session(running)
    except LakehouseError as exc:  # the project's own errors say what failed and what to do
        _error(str(exc))
        return exc.exit_code if isinstance(exc, CommandError) else EXIT_FAILURE
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`lakehouse show t | head`): not an error. Point stdout at
        # devnull so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:  # a folder that cannot be read or written: name it
        _error(f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}")
        return EXIT_FAILURE
    except Exception as exc:  # noqa: BLE001 - a bug, or a library's error we did not foresee
        if debug:
            traceback.print_exc()
        else:
            _error(f"unexpected {type(exc).__name__}: {exc} (run again with --debug for the traceback)")
        return EXIT_FAILURE


def _spark_settings(settings: LakehouseSettings, *, embedded: bool, verbose: bool) -> LakehouseSettings:
    """How a command that needs Spark reaches it: the engine the environment names, else the
    lakehouse's running engine (seconds, not a JVM start of its own), else embedded, its
    JVM's own output in the lakehouse's Spark log unless ``verbose``."""
    if not settings.spark_remote and not embedded:
        from lakehouse_assets.engine.server import attached_to_running_engine

        attached = attached_to_running_engine(settings)
        if attached is not None:
            print(f"{PROG}: on the lakehouse's running Spark Connect engine at {attached.spark_remote} "
                  "(--embedded for a Spark of its own)", file=sys.stderr)
            return attached
    if verbose:
        return settings
    return replace(settings, spark_log=settings.log_path(SPARK_LOG))


def _engine_session() -> object | None:
    """The process's Spark Connect session, if it has one (None if pyspark's Connect client
    was never imported)."""
    if "pyspark.sql.connect.session" not in sys.modules:
        return None
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    return ConnectSession.getActiveSession() or ConnectSession._get_default_session()


def _release_engine_session(running: object | None) -> None:
    """Release the Spark Connect session the command attached to an engine, unless the process
    had it before (a test calling the command in process): else the engine keeps it, its views
    and cached plans, until its idle timeout, long after the process has gone."""
    session = _engine_session()
    if session is not None and session is not running:
        from lakehouse_assets.engine.client import close_session

        # pyspark hands Connect sessions out typed as its classic SparkSession, as close_session takes them.
        close_session(cast("SparkSession", session))


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)
