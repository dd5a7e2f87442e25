"""Every command that takes a table, on a table not built yet (an empty lakehouse, or one
whose source has not landed): one line naming the table and how it gets built, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_assets_tests.cli.helpers import Runner

TABLE = "bronze.patient_changes"


@pytest.mark.parametrize("args", [
    ("show", TABLE),
    ("history", TABLE),
    ("trace", TABLE, "--where", "mrn = 1"),
    ("optimize", TABLE),
    ("vacuum", TABLE),
    ("reset", TABLE, "--yes"),
    ("sql", f"SELECT count(*) FROM {TABLE}"),  # starts Spark, then finds no such table
], ids=lambda args: args[0])
@pytest.mark.usefixtures("spark")  # sql runs on the test session's SparkSession
def test_a_command_on_a_table_not_built_yet_says_what_to_do_in_one_line(
        lakehouse: Runner, root: Path, args: tuple[str, ...]) -> None:
    result = lakehouse(*args)

    assert result.code == 1, str(result)
    # Spark's own lines may come first (sql: pyspark logs the failed query); the command's error is one line.
    errors = [line for line in result.stderr.splitlines() if line.startswith("lakehouse")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    error = errors[0]
    assert TABLE in error
    if args[0] != "reset":  # nothing to reset names what it looked for instead
        assert "dagster asset materialize -m lakehouse_assets --select bronze/patient_changes" in error
