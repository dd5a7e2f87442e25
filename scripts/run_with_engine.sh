#!/usr/bin/env bash
# `make run`: run COMMAND (dagster dev) with every Spark session of the lakehouse attached to
# its warm local Spark Connect engine (`lakehouse engine`): the engine is started first, and
# stopped when COMMAND exits or this script is interrupted (Ctrl-C, SIGTERM). An engine that
# already runs is used and left running.
#
#   scripts/run_with_engine.sh COMMAND [ARG...]
#
# Uses LAKEHOUSE_ROOT and LAKEHOUSE_ENGINE_PORT (default 15002) like the `lakehouse` command.
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: $0 COMMAND [ARG...]" >&2
  exit 2
fi
BIN="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin"
export LAKEHOUSE_ENGINE_PORT=${LAKEHOUSE_ENGINE_PORT:-15002}
# How long COMMAND may take to shut down once asked, before its processes are killed.
STOP_GRACE_SECONDS=${STOP_GRACE_SECONDS:-30}

stop_engine=0
if "$BIN/lakehouse" engine status >/dev/null 2>&1; then
  echo "The lakehouse's Spark Connect engine already runs: using it, and leaving it running."
else
  stop_engine=1
fi
# Prints the engine's URL, token file and log; fails (naming the port) if it cannot start.
"$BIN/lakehouse" engine start
# Runs of this lakehouse read the engine's token from $LAKEHOUSE_ROOT/_engine/token.
export LAKEHOUSE_SPARK_REMOTE="sc://localhost:${LAKEHOUSE_ENGINE_PORT}"

# COMMAND runs in a process group of its own, in the background: bash runs a trap only once
# a foreground command has ended, so a SIGTERM would otherwise wait for dagster dev to end by
# itself. The signal is passed on to the whole group (dagster dev, its webserver, daemon and
# runs), and what is still alive after the grace period is killed.
setsid "$@" &
child=$!
stopping=0
stop_child() {
  stopping=1
  kill -"$1" -- "-$child" 2>/dev/null || true
}
trap 'stop_child INT' INT
trap 'stop_child TERM' TERM
status=0
wait "$child" || status=$?
if [ "$stopping" = 1 ]; then
  # Signalled: the group has the grace period to end (a watchdog kills it after), then whatever
  # is left of it goes.
  ( sleep "$STOP_GRACE_SECONDS"; kill -KILL -- "-$child" 2>/dev/null ) &
  watchdog=$!
  wait "$child" 2>/dev/null || true
  kill "$watchdog" 2>/dev/null || true
  kill -KILL -- "-$child" 2>/dev/null || true
  status=143
fi
if [ "$stop_engine" = 1 ]; then
  echo "Stopping the Spark Connect engine..."
  "$BIN/lakehouse" engine stop || true
fi
exit "$status"
