#!/usr/bin/env bash
# `make run`: run COMMAND (dagster dev) with every Spark session of the lakehouse attached to
# its warm local Spark Connect engine (`lakehouse engine`): the engine is started first, and
# stopped when COMMAND exits or this script is interrupted (Ctrl-C, SIGTERM). An engine that
# already runs, or the one LAKEHOUSE_SPARK_REMOTE names, is used and left running.
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
if [ -n "${LAKEHOUSE_SPARK_REMOTE:-}" ]; then
  echo "Runs use the Spark Connect engine LAKEHOUSE_SPARK_REMOTE names."
else
  if "$BIN/lakehouse" engine status >/dev/null 2>&1; then
    echo "The lakehouse's Spark Connect engine already runs: using it, and leaving it running."
  else
    stop_engine=1
  fi
  # Prints the engine's URL, token file and log; fails (naming the port) if it cannot start.
  "$BIN/lakehouse" engine start
  # Runs of this lakehouse read the engine's token from $LAKEHOUSE_ROOT/_engine/token.
  export LAKEHOUSE_SPARK_REMOTE="sc://localhost:${LAKEHOUSE_ENGINE_PORT}"
fi

# COMMAND runs in the background, in a process group of its own (job control): bash runs a
# trap only once a foreground command has ended, so a SIGTERM would wait for dagster dev to end
# by itself. A signal is passed on to dagster dev alone, as SIGINT: it then stops its webserver
# and daemon in order (signalled too, they died under it while it waited on them). SIGINT is
# handled again in it: a background job, and whatever `make run &` starts, inherits it
# ignored, and dagster dev would then ignore SIGTERM too (it maps SIGTERM to SIGINT's handler).
set -m
env --default-signal=INT "$@" &
child=$!
set +m
stopped_by=""
command_name=$(basename "$1")
stop_child() {
  stopped_by=$1
  echo "$(date +%T) $2 received: interrupting $command_name (pid $child); it has ${STOP_GRACE_SECONDS} s to stop."
  kill -INT "$child" 2>/dev/null || true
}
trap 'stop_child 130 SIGINT' INT
trap 'stop_child 143 SIGTERM' TERM
status=0
wait "$child" || status=$?
if [ -n "$stopped_by" ]; then
  # dagster dev has the grace period to stop its services; then whatever is left of its group goes.
  if ! timeout "$STOP_GRACE_SECONDS" tail --pid="$child" -s 0.2 -f /dev/null; then
    echo "$(date +%T) $command_name did not stop within ${STOP_GRACE_SECONDS} s: killing its processes."
  fi
  kill -KILL -- "-$child" 2>/dev/null || true
  wait "$child" 2>/dev/null || true
  status=$stopped_by
fi
if [ "$stop_engine" = 1 ]; then
  echo "Stopping the Spark Connect engine..."
  "$BIN/lakehouse" engine stop || true
fi
exit "$status"
