"""Run the ``lakehouse`` command in this process, as a subprocess would see it run.

``lakehouse_assets.cli.main(argv)`` runs in the test's own interpreter: no interpreter start,
no imports of Dagster and pyspark per call, and the commands that need Spark use the test
session's one SparkSession instead of a JVM of their own. What the subprocess gave for free
is made explicit here, for one call at a time:

* the environment: ``LAKEHOUSE_ROOT`` set (or unset) and the extra variables applied, the rest
  as it is; whatever the command changes in ``os.environ`` is undone afterwards;
* the working directory (``cwd``, and back afterwards), stdin (not a terminal: ``isatty()``
  is False), stdout and stderr;
* warnings and logging as a fresh interpreter has them: warnings under Python's default
  filters printed to stderr (pytest would record them instead), and log records with no
  handler of their own written to stderr by :data:`logging.lastResort` (pytest's handlers on
  the root logger would swallow them);
* only the command's own objects finalized on its stderr: the garbage collector waits until
  it returns (earlier tests' leftovers would otherwise log there);
* the exit code: ``main``'s return value, or a ``SystemExit``'s code as ``sys.exit`` maps it;
* what a command leaves on the shared SparkSession (session settings, the log level, the
  current catalog and database, temporary views) is put back, and a command that stops the
  session or starts one of its own fails the test: either would break the tests after it.

Output the JVM writes itself (its log4j console, ``System.out``) is not captured: the JVM is
a child process started once per test session, with its own file descriptors. A test whose
proof is about that output runs the real command in a subprocess (``lakehouse_process``).
"""

from __future__ import annotations

import gc
import io
import logging
import os
import signal
import sys
import warnings
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, TextIO

import pytest

from lakehouse_assets_tests.cli.helpers import Result

# Python's warning filters in a fresh interpreter without -W or PYTHONWARNINGS (as the console
# script runs): DeprecationWarning shown only when triggered in __main__.
_FRESH_WARNING_FILTERS: list[tuple[Any, ...]] = [
    ("default", None, DeprecationWarning, "__main__", 0),
    ("ignore", None, DeprecationWarning, None, 0),
    ("ignore", None, PendingDeprecationWarning, None, 0),
    ("ignore", None, ImportWarning, None, 0),
    ("ignore", None, ResourceWarning, None, 0),
]


def run_in_process(args: Sequence[str], *, stdin_text: str = "", stdin: TextIO | None = None,
                   cwd: Path | None = None, root_env: Path | None = None,
                   extra_env: Mapping[str, str] | None = None, spark_requested: bool = False) -> Result:
    """``lakehouse *args`` run by ``main`` here, with the environment, working directory and
    streams a subprocess would have had; what it printed and its exit code. stdin holds
    ``stdin_text``, or is ``stdin`` when given (e.g. a pseudo-terminal)."""
    from lakehouse_assets.cli import main

    command = subcommand(args)
    starts_spark = needs_spark(args)
    if starts_spark and not spark_requested:
        pytest.fail(f"`lakehouse {command}` starts Spark: request the session's `spark` fixture in this test, "
                    "so that the command reuses its SparkSession instead of starting a JVM in the test process")
    stdout, stderr = _Pipe("stdout"), _Pipe("stderr", errors="backslashreplace")
    outer = {"stdout": sys.stdout, "stderr": sys.stderr}  # this process's, as the test has them
    with pytest.MonkeyPatch.context() as patch, ExitStack() as stack:
        if root_env is None:
            patch.delenv("LAKEHOUSE_ROOT", raising=False)
        else:
            patch.setenv("LAKEHOUSE_ROOT", str(root_env))
        for key, value in (extra_env or {}).items():
            patch.setenv(key, value)
        patch.chdir(cwd if cwd is not None else Path.cwd())  # back afterwards, whatever the command does
        patch.setattr(sys, "stdin", stdin if stdin is not None else io.StringIO(stdin_text))
        stack.enter_context(_environment_kept())
        stack.enter_context(_signal_handlers_kept())
        stack.enter_context(_spark_state_kept(snapshot=starts_spark))
        stack.enter_context(redirect_stdout(stdout))
        stack.enter_context(redirect_stderr(stderr))
        stack.enter_context(_fresh_process_warnings())
        stack.enter_context(_fresh_process_logging({"stdout": stdout, "stderr": stderr}, outer))
        stack.enter_context(_collector_paused())
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = _exit_code(exc)
    return Result(tuple(args), code, stdout.text(), stderr.text())


def needs_spark(args: Sequence[str]) -> bool:
    """Whether the command line runs a subcommand that starts (or reuses) a SparkSession, as the
    command's own parser declares it: in process it must find the test session's running, so
    the test has to request the ``spark`` fixture."""
    from lakehouse_assets.cli import build_parser

    with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
        try:
            return bool(getattr(build_parser().parse_args(list(args)), "spark", False))
        except SystemExit:  # a usage error, or --help: nothing starts
            return False


def subcommand(args: Sequence[str]) -> str | None:
    """The subcommand of a command line: its first word that is not a top-level option."""
    words = iter(args)
    for word in words:
        if word == "--root":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


class _Pipe(io.TextIOWrapper):
    """A text stream over bytes, like the pipe a subprocess writes its stdout or stderr
    (``role``) to: UTF-8, no terminal, no file descriptor; read back as
    ``subprocess.run(text=True)`` decodes it."""

    def __init__(self, role: str, errors: str = "strict") -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors=errors, write_through=True)
        self.role = role

    def text(self) -> str:
        self.flush()
        data = self.buffer.getvalue()  # type: ignore[attr-defined]
        # subprocess's universal newlines.
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _exit_code(exc: SystemExit) -> int:
    """The process exit status ``sys.exit(code)`` gives: None is 0, an int itself, anything
    else is printed to stderr and is 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while the command runs: what earlier tests left behind is
    finalized after it, not into its stderr (a Dagster instance's SQLite connection finalized on
    another thread logs "Exception during reset", which a subprocess would never have printed)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def _environment_kept() -> Iterator[None]:
    """``os.environ`` as it was before the call (e.g. ``build_spark_session`` sets
    PYSPARK_PYTHON); the call's own variables are undone by its monkeypatch after this."""
    before = dict(os.environ)
    try:
        yield
    finally:
        for key in set(os.environ) - set(before):
            del os.environ[key]
        for key, value in before.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


@contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """The handlers of SIGINT and SIGTERM as they were (``land --continuous`` installs its
    own for the landing and puts them back; this makes sure of it)."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            if signal.getsignal(sig) is not handler and handler is not None:
                signal.signal(sig, handler)


@contextmanager
def _fresh_process_warnings() -> Iterator[None]:
    """Warnings as a fresh interpreter shows them: Python's default filters, printed to the
    (captured) stderr. pytest's filters and recording are back afterwards."""
    with warnings.catch_warnings():
        warnings.filters[:] = _FRESH_WARNING_FILTERS
        warnings._filters_mutated()  # type: ignore[attr-defined]  # a fresh process shows each warning once

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
            stream = file if file is not None else sys.stderr
            stream.write(warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = show
        yield


@contextmanager
def _fresh_process_logging(pipes: Mapping[str, _Pipe], outer: Mapping[str, Any]) -> Iterator[None]:
    """Logging as in a fresh interpreter, with its output in the call's ``pipes``:

    * the root logger has no handlers and level WARNING, so a record no handler takes goes to
      stderr through :data:`logging.lastResort`, as it would in the subprocess (pytest's
      capturing handlers on the root would take it instead); handlers a command adds to the
      root are dropped afterwards;
    * a handler of the process's stdout or stderr (a ``StreamHandler()`` binds the stream it
      is made with: pyspark's ``SQLQueryContextLogger`` logs every failed query's error to
      stderr so) writes to the call's pipe, whenever and by whichever call it was made, and
      is given back its stream afterwards.
    """
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers[:] = []
    root.setLevel(logging.WARNING)
    moved: dict[logging.StreamHandler[Any], Any] = {}
    for handler in _stream_handlers():
        role = _PROCESS_STREAM_HANDLERS.get(handler) or _role(handler.stream, outer)
        if role is not None:
            _PROCESS_STREAM_HANDLERS[handler] = role
            moved[handler] = handler.stream
            _bind(handler, pipes[role])
    try:
        yield
    finally:
        for handler in _stream_handlers():
            stream = handler.stream
            if handler in moved:
                _bind(handler, moved[handler])
            elif isinstance(stream, _Pipe) and stream is pipes.get(stream.role):
                # Made by this call: bound to the test's stream, as if made outside a call,
                # and known as the process's from now on (the test's stream will not be).
                _PROCESS_STREAM_HANDLERS[handler] = stream.role
                _bind(handler, outer[stream.role])
        root.handlers[:] = handlers
        root.setLevel(level)


#: The handlers known to write to the process's stdout or stderr, by role: a handler made by a
#: call is given the test's stream back afterwards, which a later test's capture is not.
_PROCESS_STREAM_HANDLERS: weakref.WeakKeyDictionary[logging.Handler, str] = weakref.WeakKeyDictionary()


def _bind(handler: logging.StreamHandler[Any], stream: Any) -> None:
    """``handler.setStream(stream)`` without flushing the stream it had: that may be an
    earlier test's capture, closed since."""
    handler.acquire()
    try:
        handler.stream = stream
    finally:
        handler.release()


def _stream_handlers() -> list[logging.StreamHandler[Any]]:
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return [handler for logger in loggers if isinstance(logger, logging.Logger) for handler in logger.handlers
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)]


def _role(stream: Any, outer: Mapping[str, Any]) -> str | None:
    """"stdout" or "stderr" when ``stream`` is the process's (as it started, as the test has
    it, or as an earlier call had it), else None."""
    if stream is None:
        return None
    if isinstance(stream, _Pipe):
        return stream.role
    for role, original in (("stdout", sys.__stdout__), ("stderr", sys.__stderr__)):
        if stream is original or stream is outer[role]:
            return role
    if type(stream).__module__ == "_pytest.capture":
        # Another test's capture (capsys), closed since maybe: the handler was made while
        # that test ran, most likely for stderr (a StreamHandler's default), as pyspark's are.
        return "stderr"
    return None


@contextmanager
def _spark_state_kept(*, snapshot: bool) -> Iterator[None]:
    """What a command changes on the shared SparkSession, put back (looked at with
    ``snapshot`` only: the other commands do not use Spark); a command that stops the
    session, or starts a JVM of its own, fails the test."""
    before = _active_spark_context()
    session = _active_session() if before is not None and snapshot else None
    state = _SparkState.of(session) if session is not None else None
    try:
        yield
    finally:
        after = _active_spark_context()
        if before is None and after is not None:
            pytest.fail("the command started a SparkContext of its own in the test process: request the "
                        "`spark` fixture in this test (and declare the subcommand's parser spark=True)")
        if before is not None and after is not before:
            pytest.fail("the command stopped the test session's SparkSession: later tests cannot use it")
        if session is not None and state is not None:
            state.restore(session)


def _active_spark_context() -> Any:
    if "pyspark" not in sys.modules:  # nothing imported pyspark: no JVM
        return None
    from pyspark import SparkContext

    return SparkContext._active_spark_context


def _active_session() -> Any:
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


class _SparkState:
    """The global state of a SparkSession that a command could leave changed."""

    def __init__(self, conf: dict[str, str], log_level: str | None, catalog: str, database: str,
                 temp_views: set[str]) -> None:
        self.conf, self.log_level, self.catalog, self.database = conf, log_level, catalog, database
        self.temp_views = temp_views

    @classmethod
    def of(cls, spark: Any) -> _SparkState:
        # The session's settings last: what its first statements set up (Delta sets Parquet
        # field ids on first use) is the session's own, not the command's.
        temp_views = _temp_views(spark)
        return cls(dict(spark.conf.getAll), _log_level(spark), spark.catalog.currentCatalog(),
                   spark.catalog.currentDatabase(), temp_views)

    def restore(self, spark: Any) -> None:
        after = _SparkState.of(spark)
        for key in set(self.conf) | set(after.conf):
            if self.conf.get(key) == after.conf.get(key) or not spark.conf.isModifiable(key):
                continue
            if key in self.conf:
                spark.conf.set(key, self.conf[key])
            else:
                spark.conf.unset(key)
        if self.log_level is not None and after.log_level != self.log_level:
            spark.sparkContext.setLogLevel(self.log_level)
        if after.catalog != self.catalog:
            spark.catalog.setCurrentCatalog(self.catalog)
        if after.database != self.database:
            spark.catalog.setCurrentDatabase(self.database)
        for view in after.temp_views - self.temp_views:
            spark.catalog.dropTempView(view)


def _log_level(spark: Any) -> str | None:
    """The level of the driver's root log4j logger (what ``setLogLevel`` sets); None on Spark
    Connect, whose driver is the engine's."""
    from lakehouse_assets.spark_conf import is_connect_session

    if is_connect_session(spark):
        return None
    return str(spark._jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().toString())


def _temp_views(spark: Any) -> set[str]:
    """The session's temporary views (SHOW VIEWS lists them whatever the current database)."""
    return {row.viewName for row in spark.sql("SHOW VIEWS").collect() if row.isTemporary}
