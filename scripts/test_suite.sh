#!/usr/bin/env bash
# `make test` after its install and lint: the embedded pass, then the Connect pass
# (scripts/test_on_engine.sh), timed against the suite's budget. Extra arguments go to the
# embedded pass's pytest.
#
# The budget: `make test` within 25 minutes wall on a 2-core machine, install and lint included
# (CI stops at 90). Each pass prints its slowest tests; over budget, look there first.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
BUDGET_MINUTES=25
started=$SECONDS

# Two worker processes, each with its one SparkSession, a test file to each at a time: the
# suite waits on child processes and JVM starts much of the time, so two keep 2 cores busy.
# The long crash campaigns (marker `campaign`) are `make test-all`'s. Landing to gold through
# sensors and the UI's Materialize all run in the Connect pass, as `make run` runs them.
"$BIN/python" -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --durations=20 -m "not campaign" \
  --deselect lakehouse_assets_tests/e2e/test_land_to_gold.py \
  --deselect lakehouse_assets_tests/e2e/test_ui.py "$@"
embedded=$((SECONDS - started))

scripts/test_on_engine.sh
total=$((SECONDS - started))

printf '\nmake test: embedded pass %dm%02ds, Connect pass %dm%02ds, both %dm%02ds ' \
  $((embedded / 60)) $((embedded % 60)) $(((total - embedded) / 60)) $(((total - embedded) % 60)) \
  $((total / 60)) $((total % 60))
printf '(the budget: %d minutes for all of make test on 2 cores, install and lint included)\n' "$BUDGET_MINUTES"
