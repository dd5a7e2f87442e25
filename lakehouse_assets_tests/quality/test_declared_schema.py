"""The declared_schema check reads a table's stored types from its Delta log and compares
them with the types its declaration gives."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import dagster as dg
import pyarrow as pa
from deltalake import write_deltalake

from lakehouse_assets.quality.declared_schema import declared_schema_check
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.assets.pipeline import current_resources


def _write(settings: LakehouseSettings, table: pa.Table) -> None:
    path = Path(settings.table_path("silver", "admissions_clean"))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_deltalake(str(path), table)


def run(check: dg.AssetChecksDefinition) -> dg.AssetCheckResult:
    """``check``'s result, given the lakehouse resource (its root from LAKEHOUSE_ROOT)."""
    with dg.build_op_context(resources=current_resources()) as context:
        result = check.op.compute_fn.decorated_fn(context)  # type: ignore[union-attr]
    assert isinstance(result, dg.AssetCheckResult)
    return result


def test_a_table_stored_as_declared_passes(settings: LakehouseSettings) -> None:
    _write(settings, pa.table({"admission_id": pa.array([1], pa.int64()), "stay": pa.array([1.5], pa.float64()),
                               "undeclared": pa.array(["x"])}))
    check = declared_schema_check("silver.admissions_clean", {"admission_id": "LONG", "stay": "DOUBLE"},
                                  blocking=True)
    result = run(check)
    assert result.passed, result.description


def test_a_column_stored_with_another_type_or_missing_fails_naming_both_types(settings: LakehouseSettings) -> None:
    _write(settings, pa.table({"admission_id": pa.array([1], pa.int32()),
                               "stay": pa.array([Decimal("1.500000")], pa.decimal128(27, 6))}))
    check = declared_schema_check("silver.admissions_clean",
                                  {"admission_id": "BIGINT", "stay": "DOUBLE", "ward": "STRING"}, blocking=True)
    result = run(check)
    assert not result.passed
    assert "stay (declared double, stored decimal(27,6))" in (result.description or "")
    assert "admission_id (declared bigint, stored int)" in (result.description or "")
    assert "ward (declared string, not in the table)" in (result.description or "")


def test_a_table_not_created_yet_fails_saying_so(settings: LakehouseSettings) -> None:
    result = run(declared_schema_check("silver.admissions_clean", {"ward": "STRING"}, blocking=True))
    assert not result.passed
    assert "No table silver.admissions_clean" in (result.description or "")
