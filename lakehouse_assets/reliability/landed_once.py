"""The ``landed_once`` invariant: every record of every landed file is in its bronze table
exactly once, for every bronze table that streams a landing folder (counted per
``_source_file``, the records of each file counted as the ingestion reads its format)."""

from __future__ import annotations

from collections import Counter

from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN as SOURCE_FILE
from lakehouse_assets.reliability.flows import Flows, Ingestion
from lakehouse_assets.reliability.landed import landed_record_counts, landing_key, record_counter
from lakehouse_assets.reliability.report import InvariantResult
from lakehouse_assets.reliability.table_reader import read_or_report, table_path
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage.discovery import is_table

LANDED_ONCE = "landed_once"


def check_landed_once(settings: LakehouseSettings, flows: Flows, *, pending_ok: bool = False) -> InvariantResult:
    """Every landed record is in its bronze table exactly once (with ``pending_ok``: each
    landed file is in bronze wholly or not at all)."""
    result = InvariantResult(LANDED_ONCE, "every landed record is in its bronze table exactly once")
    for ingestion in flows.ingestions:
        _check_ingestion(result, settings, ingestion, pending_ok=pending_ok)
    if not result.checked:
        result.skipped = "no bronze table yet" if flows.ingestions else "no table ingests a landing folder"
    return result


def _check_ingestion(result: InvariantResult, settings: LakehouseSettings, ingestion: Ingestion, *,
                     pending_ok: bool) -> None:
    bronze_name = ingestion.bronze
    landing = settings.landing_path(ingestion.landing_source)
    count = record_counter(ingestion.format, header=ingestion.header, multi_line=ingestion.multi_line)
    if count is None:
        result.passed_over.append(f"{bronze_name}: its {ingestion.format} files cannot be counted without Spark")
        return
    bronze = table_path(settings, bronze_name)
    expected = landed_record_counts(landing, count, ingestion.pattern) if landing.is_dir() else {}
    if not is_table(bronze):
        if expected and not pending_ok:
            result.checked.append(bronze_name)
            result.add(bronze_name, f"no table, but {len(expected)} files landed in {landing}")
        return
    result.checked.append(bronze_name)
    found: Counter[str | None] = Counter()
    # A routed ingestion keeps each landed record in the table or its quarantine.
    for name in (bronze_name, *([ingestion.quarantine] if ingestion.quarantine else [])):
        location = table_path(settings, name)
        if name != bronze_name and not is_table(location):
            continue
        rows = read_or_report(result, settings, name, [SOURCE_FILE])
        if rows is None:
            return
        found.update(landing_key(v, landing) if v else None for v in rows.column(SOURCE_FILE).to_pylist())
    held = "bronze or its quarantine" if ingestion.quarantine else "bronze"
    missing, duplicated, partial = [], [], []
    for path, records in sorted(expected.items()):
        got = found.get(path, 0)
        shown = landing / path
        if got == records:
            continue
        if got == 0:
            if not pending_ok and records:
                missing.append(f"{shown}: {records} records landed, none in {held}")
        elif got > records:
            duplicated.append(f"{shown}: {records} records landed, {got} rows in {held}")
        else:
            partial.append(f"{shown}: {records} records landed, only {got} rows in {held}")
    if missing:
        result.add(bronze_name, f"{len(missing)} landed files are not in {held}", missing)
    if duplicated:
        result.add(bronze_name, f"{len(duplicated)} landed files have more rows in {held} than records "
                   "(ingested twice)", duplicated)
    if partial:
        result.add(bronze_name, f"{len(partial)} landed files are only partly in {held}", partial)
    if found.get(None):
        result.add(bronze_name, f"{found[None]} bronze rows have no {SOURCE_FILE}")
