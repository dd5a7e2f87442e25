# Every target installs what it needs: `make run` and `make test` work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
export LAKEHOUSE_ROOT ?= $(CURDIR)/lakehouse_data
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
DAGSTER_PORT ?= 3000
# pytest-xdist workers of the embedded test pass (each starts a Spark JVM of ~1 GB).
TEST_WORKERS ?= 2

.PHONY: install run lint test test-fast clean bench bench-quick soak

$(INSTALLED): pyproject.toml constraints.txt scripts/check_java.sh jars/pom.xml jars/SHA256SUMS scripts/install_jars.sh
	@scripts/check_java.sh
	@# Delta Lake's JVM jars, with Maven, checked against their committed sums: nothing downloads at run time.
	@scripts/install_jars.sh
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11" >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	$(BIN)/pip install --quiet -c constraints.txt -e ".[test]"
	@# Spark's and Delta's classes, parsed once: every JVM the lakehouse starts maps them (5 s less CPU each).
	@$(BIN)/python -m lakehouse_assets.class_archive 2>$(VENV)/class-archive.log \
	  || { cat $(VENV)/class-archive.log >&2; exit 1; }
	@touch $@

install: $(INSTALLED)

## Start the Dagster UI on 127.0.0.1 with a persistent home, so run history and cursors survive restarts.
## Runs attach to a warm Spark Connect engine (`lakehouse engine`), started first and stopped when the UI exits.
run: $(INSTALLED)
	@scripts/check_java.sh
	@# A root on object storage (s3a://...) is no local folder to make.
	@mkdir -p "$(DAGSTER_HOME)"; case "$(LAKEHOUSE_ROOT)" in *://*) ;; *) mkdir -p "$(LAKEHOUSE_ROOT)" ;; esac
	@cp instance/dagster.yaml "$(DAGSTER_HOME)/dagster.yaml"
	@# A first batch of reference data, so the sensors have something to carry to gold at once.
	@$(BIN)/lakehouse land --files 5 --changes 3 --if-empty
	scripts/run_with_engine.sh $(BIN)/dagster dev -h 127.0.0.1 -p $(DAGSTER_PORT) -w workspace.yaml

## Lint and type-check: ruff (pyflakes, pycodestyle, import order, bugbear, pyupgrade) and mypy (strict, the whole
## package). Settings in pyproject.toml.
lint: $(INSTALLED)
	$(BIN)/ruff check lakehouse_assets lakehouse_assets_tests benchmarks scripts examples
	$(BIN)/mypy

S3_SERVER := jars/s3-server/lib/.installed
$(S3_SERVER): jars/s3-server/pom.xml jars/s3-server/SHA256SUMS jars/s3-server-legacy/pom.xml \
		jars/s3-server-legacy/SHA256SUMS scripts/install_jars.sh
	@# The tests' S3-API server (s3proxy), with Maven, checked against its committed sum; and s3proxy 2,
	@# a store the lakehouse cannot work with (the store probe's tests).
	@scripts/install_jars.sh jars/s3-server
	@scripts/install_jars.sh jars/s3-server-legacy
	@touch $@

## `make run` with the lakehouse on object storage: a local S3-API server (s3proxy, the tests' server) on
## 127.0.0.1:$(STORE_PORT) serves the bucket `lake` from $(STORE_DIR)/buckets (kept between runs), the root is
## s3a://lake/lakehouse, and the server stops when the UI exits. Its own Dagster home and engine port, so that it
## runs beside `make run`'s lakehouse (give it another DAGSTER_PORT then). docs/guides/object-storage.md.
STORE_DIR ?= $(CURDIR)/lakehouse_store
STORE_PORT ?= 9100
.PHONY: run-on-store
run-on-store: $(INSTALLED) $(S3_SERVER)
	$(BIN)/python -m lakehouse_assets_tests.s3_server --base "$(STORE_DIR)/buckets" --bucket lake --port $(STORE_PORT) -- \
	  env LAKEHOUSE_ENGINE_PORT=$${LAKEHOUSE_ENGINE_PORT:-15003} \
	  $(MAKE) run LAKEHOUSE_ROOT=s3a://lake/lakehouse DAGSTER_HOME="$(CURDIR)/.dagster_home_store"

## Run the test suite (what CI runs): the embedded pass and, beside it, the Connect pass on a warm
## Spark Connect engine, with the lint and type checks (`make lint`) beside them as they start.
## Budget: 25 minutes on 2 cores, install included; each pass prints its 20 slowest tests, and the
## total is printed last (scripts/test_suite.sh).
test: $(INSTALLED) $(S3_SERVER)
	@scripts/check_java.sh
	@# The UI tests drive Debian's Chromium (Playwright cannot download its own browser here).
	@scripts/install_browser.sh
	TEST_WORKERS=$(TEST_WORKERS) scripts/test_suite.sh

## Everything `make test` runs, then the long proofs (about 2 hours on 2 cores): the crash
## campaigns at full size (marker `campaign`: random moments, many kills, the declared sources,
## AUTO CDC mid-merge), the crash soak embedded and on an engine, and the engine's health over
## ENGINE_HEALTH_INCREMENTS increments. Run it before resolving an issue that touches a write path.
.PHONY: test-all
test-all: test
	$(BIN)/python -m pytest -m campaign --durations=10
	$(MAKE) soak
	$(MAKE) soak SOAK_ENGINE=1 SOAK_KILLS=$(SOAK_ENGINE_KILLS)
	$(MAKE) bench-engine-health

## Skip the slow end-to-end tests (14 minutes on 2 cores for 1,083 tests, measured 2026-11-28; while iterating, run the
## files you touch).
test-fast: $(INSTALLED)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not slow and not campaign"

## Benchmark suite (issue 9): every contender on the same data; writes benchmarks/results/latest.{json,md}.
## Under 30 minutes on a 2-core machine; run it when nothing else is using the machine.
## BENCH_ARGS="--product HEAD" measures the last commit instead of the working tree.
BENCH_ARGS ?=
bench: $(INSTALLED)
	@scripts/check_java.sh
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

## Spark jobs of the whole graph, per step, after one landed file and with nothing new (embedded; issue 67's
## targets: 60 and 2): benchmarks/results/spark_jobs.{json,md}. About 5 minutes on 2 cores.
.PHONY: bench-jobs
bench-jobs: $(INSTALLED)
	@scripts/check_java.sh
	$(BIN)/python -m benchmarks.spark_jobs

## A small version of the suite (under 5 minutes): benchmarks/results/quick.{json,md}.
bench-quick: $(INSTALLED)
	@scripts/check_java.sh
	$(BIN)/python -m benchmarks.run --quick $(BENCH_ARGS)

## Benchmarks of the warm Spark Connect engine (issue 15): lakehouse_assets embedded and on one warm engine, against
## the hand-written script cold and in a warm session, land -> gold on the engine too: benchmarks/results/latest.{json,md}.
## About 35 minutes on a 2-core machine; run it when nothing else is using the machine.
.PHONY: bench-engine bench-engine-health bench-gold
bench-engine: $(INSTALLED)
	@scripts/check_java.sh
	$(BIN)/python -m benchmarks.run --output latest --budget-minutes 45 \
		--contenders lakehouse_assets,lakehouse_assets_connect,plain_streaming,plain_streaming_warm,spark_trivial $(BENCH_ARGS)

## Does a long-lived engine stay healthy? ENGINE_HEALTH_INCREMENTS one-file increments on one engine, each a fresh
## Dagster run attached to it; memory, threads, processes, sessions, temp files after each, and their slopes:
## benchmarks/results/engine_health.{json,md}. About 10 s per increment (200: some 35-40 minutes).
ENGINE_HEALTH_INCREMENTS ?= 200
bench-engine-health: $(INSTALLED)
	@scripts/check_java.sh
	$(BIN)/python -m benchmarks.engine_health --increments $(ENGINE_HEALTH_INCREMENTS)

## A routed step (table + quarantine) on a warm engine: one foreachBatch query against two native Delta flows, on
## the same increments: benchmarks/results/routed_flows.{json,md}. About 5 minutes.
.PHONY: bench-routed
bench-routed: $(INSTALLED)
	@scripts/check_java.sh
	$(BIN)/python -m benchmarks.routed_flows

## A landing sensor's look as files pile up, on a local disk and on an S3-API server (s3proxy):
## benchmarks/results/landing_listing.{json,md}. About 3 minutes.
.PHONY: bench-landing
bench-landing: $(INSTALLED) $(S3_SERVER)
	$(BIN)/python -m benchmarks.landing_listing

## Issue 48's cost target: a one-file increment (bronze -> silver -> gold, as `make bench`'s) with the root on an
## S3-API store (s3proxy on loopback, started and stopped here) against the same on a local disk, alternating, a fresh
## process each; then one more store increment's S3 requests: benchmarks/results/object_storage.{json,md}.
## About 10-15 minutes on a 2-core machine with STORE_REPEATS=5; run it when nothing else is using the machine.
## BENCH_ARGS="--product HEAD" measures the last commit instead of the working tree.
STORE_REPEATS ?= 5
.PHONY: bench-store
bench-store: $(INSTALLED) $(S3_SERVER)
	@scripts/check_java.sh
	$(BIN)/python -m benchmarks.object_storage --repeats $(STORE_REPEATS) $(BENCH_ARGS)

## A one-file gold increment on 10k, 1M and 10M silver rows, kept by key and in complete
## mode: benchmarks/results/gold_increment.{json,md}. About 15-20 minutes.
bench-gold: $(INSTALLED)
	@scripts/check_java.sh
	$(BIN)/python -m benchmarks.gold_increment

## Per-run overhead after 10 and after 10,000 micro-batches: a Delta table's open (delta-rs), one batch's commit as the
## sink makes it and Delta's streaming source reading it (availableNow, log cache cold and warm), as built, after
## OPTIMIZE, and after VACUUM and a log checkpoint once the log is past its retention:
## benchmarks/results/many_batches.{json,md}. Embedded Spark (Java 17); about 5 minutes on a 2-core machine.
.PHONY: bench-many-batches
bench-many-batches: $(INSTALLED)
	@scripts/check_java.sh
	$(BIN)/python -m benchmarks.many_batches

## The same question asked of a whole one-file increment (land -> bronze -> silver -> gold) and of a run
## with nothing new, on a lakehouse whose tables are padded to 10 and to 10,000 micro-batches, then after an aged log
## and `lakehouse vacuum --all`, then `lakehouse optimize --all`: benchmarks/results/many_batches_increment.{json,md}.
## About 25 minutes with 2 repeats on a 2-core machine, 35 when it is busy (3 repeats: half as long again);
## INCREMENT_BATCHES="10 1000" INCREMENT_REPEATS=1 for a quick look.
INCREMENT_BATCHES ?= 10 10000
INCREMENT_REPEATS ?= 2
.PHONY: bench-increment-after-batches
bench-increment-after-batches: $(INSTALLED)
	@scripts/check_java.sh
	$(BIN)/python -m benchmarks.increment_after_batches --batches $(INCREMENT_BATCHES) --repeats $(INCREMENT_REPEATS)

## Crash soak (issue 8): SOAK_KILLS runs of the whole graph SIGKILLed at the fault points and at
## random moments, then every invariant; writes reliability/results/latest.{md,json}.
## SOAK_SEED repeats a schedule. About 35 s per kill on a 2-core machine (60 kills: ~35 min).
## SOAK_ENGINE=1 runs on a Spark Connect engine and SIGKILLs the engine too (reliability/results/engine.{md,json}).
SOAK_KILLS ?= 60
SOAK_ENGINE_KILLS ?= 20
SOAK_SEED ?=
SOAK_ENGINE ?=
soak: $(INSTALLED)
	@scripts/check_java.sh
	$(BIN)/python -m lakehouse_assets_tests.reliability.soak --kills $(SOAK_KILLS) $(if $(SOAK_SEED),--seed $(SOAK_SEED)) $(if $(SOAK_ENGINE),--engine)

clean:
	rm -rf $(VENV) lakehouse_data .dagster_home .pytest_cache jars/lib jars/s3-server/lib jars/s3-server-legacy/lib
