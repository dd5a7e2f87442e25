#!/usr/bin/env bash
# `make test` after its install and lint: the embedded pass and the Connect pass
# (scripts/test_on_engine.sh) side by side, timed against the suite's budget. Extra arguments go
# to the embedded pass's pytest.
#
# The budget: `make test` within 25 minutes wall on a 2-core machine, install and lint included
# (CI stops at 90). Each pass prints its slowest tests; over budget, look there first.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
BUDGET_MINUTES=25
started=$SECONDS

# The Connect pass is one pytest process talking to one engine: alone it leaves a quarter of the
# 2 cores idle, waiting on the engine and on Dagster. So it runs beside the embedded pass, its
# output kept in a file and printed once both are done.
mkdir -p test-artifacts
# The lint and type checks (`make lint`, mypy alone for 20 s on one core) beside the passes'
# start, their output printed at the end: a failure fails `make test` all the same.
lint_log=test-artifacts/lint.log
( make --no-print-directory lint > "$lint_log" 2>&1; echo $? > "$lint_log.rc" ) &
lint=$!

connect_log=test-artifacts/connect-pass.log
# Every test's time, for finding what to make cheaper next: test-artifacts/*-pass.xml (JUnit XML).
( PYTEST_EXTRA="--junitxml=test-artifacts/connect-pass.xml" scripts/test_on_engine.sh > "$connect_log" 2>&1
  echo $? > "$connect_log.rc"; echo $((SECONDS)) > "$connect_log.end" ) &
connect=$!

# Two worker processes, each with its one SparkSession, a test file to each at a time (longest
# first: conftest.py), in the order given, except that the files using the reference lakehouse
# go to one worker together, which builds it once (conftest.py's ReferenceLakehouseScheduling).
# The long crash campaigns (marker `campaign`) are `make test-all`'s. Landing to gold through
# sensors and the UI's Materialize all run in the Connect pass, as `make run` runs them, and so
# does the lakehouse on object storage (on an engine of its own).
embedded_rc=0
"$BIN/python" -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder --durations=20 \
  --junitxml=test-artifacts/embedded-pass.xml \
  -m "not campaign" \
  --deselect lakehouse_assets_tests/e2e/test_land_to_gold.py \
  --deselect lakehouse_assets_tests/e2e/test_ui.py \
  --deselect lakehouse_assets_tests/e2e/test_on_object_storage.py "$@" || embedded_rc=$?
embedded=$((SECONDS - started))

wait "$lint" || true
lint_rc=$(cat "$lint_log.rc" 2>/dev/null || echo 1)
wait "$connect" || true
connect_rc=$(cat "$connect_log.rc" 2>/dev/null || echo 1)
connect_seconds=$(( $(cat "$connect_log.end" 2>/dev/null || echo "$SECONDS") - started ))
printf '\n======== the lint and type checks (%s) ========\n' "$lint_log"
cat "$lint_log"
printf '\n======== the Connect pass (%s) ========\n' "$connect_log"
cat "$connect_log"
total=$((SECONDS - started))

printf '\nmake test: embedded pass %dm%02ds, Connect pass %dm%02ds beside it, both %dm%02ds ' \
  $((embedded / 60)) $((embedded % 60)) $((connect_seconds / 60)) $((connect_seconds % 60)) \
  $((total / 60)) $((total % 60))
printf '(the budget: %d minutes for all of make test on 2 cores, install and lint included)\n' "$BUDGET_MINUTES"
[ "$lint_rc" -eq 0 ] && [ "$embedded_rc" -eq 0 ] && [ "$connect_rc" -eq 0 ]
