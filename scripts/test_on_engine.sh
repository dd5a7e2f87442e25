#!/usr/bin/env bash
# The Connect pass of `make test`: the tests whose code paths differ on an engine, again, with
# every session attached to a warm Spark Connect engine (`lakehouse engine`) instead of an
# embedded one. The engine has a
# lakehouse root of its own for its pid, token and log; the tests make their own roots and
# reach it by URL, so the token goes in the URL.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
engine_root=$(mktemp -d -t lakehouse_engine.XXXXXX)
export LAKEHOUSE_ENGINE_PORT=${LAKEHOUSE_TEST_ENGINE_PORT:-15012}
stop_engine() {
  "$BIN/lakehouse" --root "$engine_root" engine stop >/dev/null 2>&1 || true
  rm -rf "$engine_root"
}
trap stop_engine EXIT
# Set like the test session's embedded one (lakehouse_assets_tests/conftest.py): the Spark settings
# for tiny data, the C1 compiler alone and the serial GC (one collector thread: the other cores are
# the other pass's).
LAKEHOUSE_SPARK_CONF=$("$BIN/python" -c 'import json; from lakehouse_assets_tests.conftest import SMALL_DATA_CONF, TEST_JVM_OPTIONS
print(json.dumps({**SMALL_DATA_CONF, "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS}))') \
  "$BIN/lakehouse" --root "$engine_root" engine start
LAKEHOUSE_SPARK_REMOTE="sc://localhost:${LAKEHOUSE_ENGINE_PORT}/;token=$(cat "$engine_root/_engine/token")"
export LAKEHOUSE_SPARK_REMOTE
# By default the tests whose code paths differ on an engine, one case of each where the cases
# differ only in driver-side logic (Dagster's, the rules', the sensors': the same on both
# engines; CI's time is a budget, `make test` stays within 25 minutes): sessions and their
# isolation, tables by name and temp views, ingestion, the Delta source and sink, checks, the graph
# (the reference build's two Materialize all, and one with a source not landed: inputs of missing
# tables are read on the driver either way), expectations (a FAIL raised in the engine's Python
# worker), AUTO CDC in both forms, the event log (a batch's facts from a sink running in the
# engine's Python worker), quarantine replay (driver-side commits around reads the engine runs: a
# SQL table's, its stream a temp view in the run's session), a second source declared in a package
# of its own (its landing sensor's run, checks, and verify recomputing its gold over the engine), a
# Lakeflow Python pipeline loaded through LAKEHOUSE_PIPELINES (flows called with the run's Connect
# session behind the pipeline's `spark`, cloudFiles as Auto Loader, expect_or_drop routing, AUTO
# CDC; its SQL twin's statements are SQL assets, as in the replay test), Columns a pipeline file
# built at its top level (recorded at load, built as Spark Connect plans in the run), a killed run, dagster dev from landing to gold (the sensors'
# path) and the UI's Materialize all in Chromium: both as `make run` runs them, on its engine, and
# here only; and the lakehouse on object storage, on an engine of its own started with the
# store's credentials (here only: it needs no embedded session, and this pass ends first).
# Arguments replace the list (any pytest arguments); PYTEST_EXTRA adds options to either (e.g. --junitxml=FILE).
if [ $# -eq 0 ]; then
  set -- \
    lakehouse_assets_tests/engine/test_isolation.py \
    lakehouse_assets_tests/tables/test_lakehouse_tables.py::test_a_join_and_aggregate_across_layers_matches_an_independent_delta_reader \
    lakehouse_assets_tests/tables/test_lakehouse_tables.py::test_time_travel_by_version_in_sql_and_by_timestamp \
    lakehouse_assets_tests/tables/test_lakehouse_tables.py::test_a_stream_by_name_reads_every_row_once \
    lakehouse_assets_tests/tables/test_lakehouse_tables.py::test_the_sql_command_prints_a_table_or_json \
    lakehouse_assets_tests/tables/test_lakehouse_tables.py::test_a_table_written_later_and_another_lakehouse_are_found \
    lakehouse_assets_tests/tables/test_lakehouse_tables.py::test_a_session_on_a_driver_that_holds_every_table_registers_nothing \
    lakehouse_assets_tests/tables/test_lakehouse_tables.py::test_two_processes_query_the_tables_by_name_at_once \
    lakehouse_assets_tests/io/test_delta_io_manager.py::test_temp_views_and_tables_by_name_work_in_a_body_and_never_reach_the_next_asset \
    lakehouse_assets_tests/ingestion/test_autoloader.py::test_each_file_once_and_later_files_by_the_next_run \
    lakehouse_assets_tests/ingestion/test_autoloader.py::test_bad_records_and_a_new_column_in_every_evolution_mode \
    lakehouse_assets_tests/ingestion/test_autoloader.py::test_a_file_landing_during_a_run_is_taken_by_this_run_or_the_next \
    lakehouse_assets_tests/ingestion/test_autoloader.py::test_an_ingestion_without_expectations_appends_through_deltas_own_sink_exactly_once \
    --deselect "lakehouse_assets_tests/ingestion/test_autoloader.py::test_bad_records_and_a_new_column_in_every_evolution_mode[failOnNewColumns-False]" \
    --deselect "lakehouse_assets_tests/ingestion/test_autoloader.py::test_bad_records_and_a_new_column_in_every_evolution_mode[addNewColumns-False]" \
    --deselect "lakehouse_assets_tests/ingestion/test_autoloader.py::test_bad_records_and_a_new_column_in_every_evolution_mode[none-False]" \
    lakehouse_assets_tests/storage/test_delta_connector.py::test_delta_reads_the_stores_tables_and_writes_tables_delta_rs_opens \
    lakehouse_assets_tests/storage/test_delta_connector.py::test_string_columns_are_stored_as_plain_strings_other_readers_open \
    lakehouse_assets_tests/storage/test_sink.py \
    lakehouse_assets_tests/quality/test_checks.py::test_checks_pass_on_good_rows_and_count_the_bad_ones \
    lakehouse_assets_tests/quality/test_checks.py::test_a_complete_mode_table_is_checked_as_it_stands \
    lakehouse_assets_tests/quality/test_checks.py::test_schema_drift_warns_with_the_columns_that_changed \
    lakehouse_assets_tests/quality/test_quarantine.py \
    lakehouse_assets_tests/assets/test_materialize_all.py::test_only_the_seeds_data_builds_the_seeds_pipeline_and_skips_the_change_flow \
    lakehouse_assets_tests/assets/test_materialize_all.py::test_a_table_materialized_alone_over_an_upstream_never_built_is_skipped \
    lakehouse_assets_tests/assets/test_expectations.py::test_a_python_asset_warns_counts_and_fails_its_update_with_nothing_committed \
    lakehouse_assets_tests/assets/test_quarantine.py::test_bad_records_are_quarantined_with_reasons_across_incremental_runs \
    lakehouse_assets_tests/cdc/test_reference_flow.py::test_landed_changes_reach_both_silver_tables \
    lakehouse_assets_tests/io/test_event_log.py::test_the_event_log_adds_up_and_is_what_a_run_reports \
    lakehouse_assets_tests/io/test_replay_sql.py \
    lakehouse_assets_tests/test_admissions.py \
    "lakehouse_assets_tests/pipelines/test_lakeflow_examples.py::test_each_lakeflow_examples_tables_equal_the_native_ones[python]" \
    lakehouse_assets_tests/pipelines/test_lakeflow_examples.py::test_the_examples_checks_run_and_their_tables_hold_verifys_invariants \
    lakehouse_assets_tests/pipelines/test_import_columns.py::test_a_tutorial_style_cdc_pipeline_runs_with_its_top_level_columns \
    lakehouse_assets_tests/pipelines/test_landing_paths.py::test_globs_mounts_and_dropped_rows_run_from_the_landing_sensors \
    "lakehouse_assets_tests/reliability/test_killed_run_on_engine.py::test_a_run_killed_mid_query_is_followed_by_a_whole_run[silver.recordings_enriched]" \
    lakehouse_assets_tests/e2e/test_land_to_gold.py \
    lakehouse_assets_tests/e2e/test_ui.py \
    lakehouse_assets_tests/e2e/test_on_object_storage.py
fi
# A base temporary folder of its own: `make test` runs this beside the embedded pass, whose
# pytest prunes old numbered folders under the shared one.
basetemp=$(mktemp -d -t lakehouse_connect_pass.XXXXXX)
status=0
"$BIN/python" -m pytest -p no:cacheprovider --basetemp "$basetemp" --durations=20 ${PYTEST_EXTRA:-} "$@" || status=$?
if [ "$status" -ne 0 ] && [ -f "$engine_root/_engine/engine.log" ]; then
  # A run's error on the engine is Spark's, in the engine's log: keep it, and show its last errors.
  mkdir -p test-artifacts
  cp "$engine_root/_engine/engine.log" test-artifacts/connect-engine.log
  echo "---- the engine's last errors (all of its log: test-artifacts/connect-engine.log) ----"
  grep -E "ERROR|Exception" "$engine_root/_engine/engine.log" | tail -n 30 || true
fi
exit "$status"
