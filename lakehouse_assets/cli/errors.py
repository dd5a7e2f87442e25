"""The exit codes the ``lakehouse`` command promises, and the errors that choose them."""

from __future__ import annotations

from lakehouse_assets.errors import LakehouseError

EXIT_OK = 0
#: The command ran and failed: a missing table, a refused landing, a declined confirmation.
EXIT_FAILURE = 1
#: The command line was wrong, or a question needed an answer that could not be asked.
EXIT_USAGE = 2
#: Interrupted by Ctrl-C where that is not the normal way to stop (128 + SIGINT).
EXIT_INTERRUPTED = 130


class CommandError(LakehouseError):
    """An expected failure of a command: printed as one message, without a traceback."""

    exit_code = EXIT_FAILURE


class UsageError(CommandError):
    """The command cannot run as invoked; the message says which option to pass."""

    exit_code = EXIT_USAGE
