#!/usr/bin/env bash
# `make run`: run COMMAND (dagster dev) with every Spark session of the lakehouse attached to
# its warm local Spark Connect engine (`lakehouse engine`): the engine is started first, and
# stopped when COMMAND exits or this script is interrupted. An engine that already runs is
# used and left running.
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

if "$BIN/lakehouse" engine status >/dev/null 2>&1; then
  echo "The lakehouse's Spark Connect engine already runs: using it, and leaving it running."
else
  stop_engine() {
    echo "Stopping the Spark Connect engine..."
    "$BIN/lakehouse" engine stop || true
  }
  trap stop_engine EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
fi
# Prints the engine's URL, token file and log; fails (naming the port) if it cannot start.
"$BIN/lakehouse" engine start
# Runs of this lakehouse read the engine's token from $LAKEHOUSE_ROOT/_engine/token.
export LAKEHOUSE_SPARK_REMOTE="sc://localhost:${LAKEHOUSE_ENGINE_PORT}"
"$@"
