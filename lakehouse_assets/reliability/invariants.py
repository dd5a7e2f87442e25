"""The lakehouse's exactly-once promises, checked on the tables as they are on disk.

Five invariants, each read from the Delta tables directly (their log files, and rows through
the store's Spark-free snapshot reader: not Spark and not the write path, so they are
independent of the code they judge):

``landed_once``
    Every record of every landed file is in bronze exactly once (counted per ``_source_file``).
``bronze_routed``
    Bronze = silver + quarantine, record for record: the quarantine's rows are bronze rows,
    and the bronze rows not quarantined are exactly silver's rows (as a multiset); and the
    expectation counts committed with silver's batches checked exactly those rows, once.
``gold_recomputed``
    Each gold table equals a batch recomputation of its logic from its source table.
``versions_whole``
    No table has a half-written version: every commit file of every table parses, versions
    run without gaps, no streaming batch is committed twice, and every data file of the
    latest snapshot exists with the size and row count its log entry states.
``checkpoints_agree``
    Every streaming checkpoint and the tables its query writes agree on the last batch.
``events_once``
    The event log holds every batch a table's query committed exactly once (``committed``).

With ``pending_ok`` the checks accept work that a run has not done yet (files not ingested,
silver behind bronze, gold behind silver), as after a crash and before the next run: what
is there must still be whole and never duplicated.

Rows are compared in Python, so a check reads each table once into memory: fine for the
reference data set and for tests, minutes for tables of tens of millions of rows.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN as SOURCE_FILE
from lakehouse_assets.quality.expectations import EXPECTATIONS_KEY, ExpectationCounts
from lakehouse_assets.reliability import delta_files
from lakehouse_assets.reliability.events_once import check_events_once
from lakehouse_assets.reliability.landed import landed_record_counts, landing_key
from lakehouse_assets.reliability.replayed import ROW_IDENTITY, is_replay, owed_to_table
from lakehouse_assets.reliability.report import InvariantReport, InvariantResult
from lakehouse_assets.reliability.versions_whole import VERSIONS_WHOLE, check_table_whole, check_versions_whole
from lakehouse_assets.settings import CHECKPOINTS_DIR, LakehouseSettings
from lakehouse_assets.storage.discovery import discover_tables

LANDED_ONCE = "landed_once"
BRONZE_ROUTED = "bronze_routed"
GOLD_RECOMPUTED = "gold_recomputed"
CHECKPOINTS_AGREE = "checkpoints_agree"

QUARANTINE_REASON = "_quarantine_reason"
SILVER_KEY = ("device_id", "mrn", "time", "heartrate")
_DAY = 86_400


@dataclass(frozen=True)
class RecordFlow:
    """Which tables one source's records flow through (``layer.name`` each)."""

    landing_source: str = "recordings"
    bronze: str = "bronze.recordings"
    silver: str = "silver.recordings_enriched"
    quarantine: str = "silver.recordings_quarantine"
    daily_patient_avg: str = "gold.daily_patient_avg"
    device_counts: str = "gold.device_counts"


#: The reference pipeline's tables (lakehouse_assets.assets).
REFERENCE_FLOW = RecordFlow()


def check_all(settings: LakehouseSettings, *, pending_ok: bool = False,
              flow: RecordFlow = REFERENCE_FLOW) -> InvariantReport:
    """Check every invariant on the lakehouse at ``settings.root``."""
    checks: list[Callable[[], InvariantResult]] = [
        lambda: check_landed_once(settings, flow, pending_ok=pending_ok),
        lambda: check_bronze_routed(settings, flow, pending_ok=pending_ok),
        lambda: check_gold_recomputed(settings, flow, pending_ok=pending_ok),
        lambda: check_versions_whole(settings),
        lambda: check_checkpoints_agree(settings, flow),
        lambda: check_events_once(settings, pending_ok=pending_ok),
    ]
    return InvariantReport([check() for check in checks])


# -- landed_once -------------------------------------------------------------------------------
def check_landed_once(settings: LakehouseSettings, flow: RecordFlow = REFERENCE_FLOW, *,
                      pending_ok: bool = False) -> InvariantResult:
    """Every landed record is in bronze exactly once (with ``pending_ok``: each landed
    file is in bronze wholly or not at all)."""
    result = InvariantResult(LANDED_ONCE, "every landed record is in bronze exactly once")
    landing = settings.landing_path(flow.landing_source)
    bronze = _table_path(settings, flow.bronze)
    expected = landed_record_counts(landing) if landing.is_dir() else {}
    if not delta_files.is_table(bronze):
        if expected and not pending_ok:
            result.add(flow.bronze, f"no table, but {len(expected)} files landed in {landing}")
        else:
            result.skipped = f"no table {flow.bronze} yet"
        return result
    rows = _read(result, flow.bronze, bronze, [SOURCE_FILE])
    if rows is None:
        return result
    found = Counter(landing_key(v, landing) if v else None for v in rows.column(SOURCE_FILE).to_pylist())
    missing, duplicated, partial = [], [], []
    for path, records in sorted(expected.items()):
        got = found.get(path, 0)
        shown = landing / path
        if got == records:
            continue
        if got == 0:
            if not pending_ok and records:
                missing.append(f"{shown}: {records} records landed, none in bronze")
        elif got > records:
            duplicated.append(f"{shown}: {records} records landed, {got} rows in bronze")
        else:
            partial.append(f"{shown}: {records} records landed, only {got} rows in bronze")
    if missing:
        result.add(flow.bronze, f"{len(missing)} landed files are not in bronze", missing)
    if duplicated:
        result.add(flow.bronze, f"{len(duplicated)} landed files have more rows in bronze than records "
                   "(ingested twice)", duplicated)
    if partial:
        result.add(flow.bronze, f"{len(partial)} landed files are only partly in bronze", partial)
    if found.get(None):
        result.add(flow.bronze, f"{found[None]} bronze rows have no {SOURCE_FILE}")
    return result


# -- bronze_routed -----------------------------------------------------------------------------
def check_bronze_routed(settings: LakehouseSettings, flow: RecordFlow = REFERENCE_FLOW, *,
                        pending_ok: bool = False) -> InvariantResult:
    """Bronze = silver + quarantine, record for record (with ``pending_ok``: silver and
    quarantine hold only bronze records, each at most as often as bronze does)."""
    result = InvariantResult(BRONZE_ROUTED, "bronze = silver + quarantine, record for record")
    paths = {name: _table_path(settings, name) for name in (flow.bronze, flow.silver, flow.quarantine)}
    if not delta_files.is_table(paths[flow.bronze]):
        result.skipped = f"no table {flow.bronze} yet"
        return result
    tables = {}
    for name, path in paths.items():
        if delta_files.is_table(path):
            tables[name] = _read(result, name, path, None)
            if tables[name] is None:
                return result
    bronze = tables[flow.bronze]
    silver, quarantine = tables.get(flow.silver), tables.get(flow.quarantine)
    if not pending_ok and bronze.num_rows and (silver is None or quarantine is None):
        absent = [n for n in (flow.silver, flow.quarantine) if tables.get(n) is None]
        result.add(flow.bronze, f"{bronze.num_rows} bronze rows but no table {' or '.join(absent)}")
        return result
    # Quarantined rows carry every bronze column as it was.
    columns = list(bronze.column_names)
    in_bronze = Counter(delta_files.row_tuples(bronze, columns))
    quarantined = Counter(delta_files.row_tuples(quarantine, columns)) if quarantine is not None else Counter()
    # Rows a replay already moved to silver and has yet to delete from the quarantine are silver's.
    owed = owed_to_table(paths[flow.silver], paths[flow.quarantine]) if silver is not None else Counter()
    for row in list(quarantined):
        identity = tuple(row[columns.index(c)] if c in columns else None for c in ROW_IDENTITY)
        while owed[identity] > 0 and quarantined[row] > 0:
            owed[identity] -= 1
            quarantined[row] -= 1
    quarantined = +quarantined
    invented = quarantined - in_bronze
    if invented:
        result.add(flow.quarantine, f"{sum(invented.values())} quarantined rows are not in bronze, or are "
                   "there fewer times (quarantined twice)", _quote(columns, invented))
    # What bronze holds and quarantine does not must be in silver, as silver shapes it.
    positions = [columns.index(c) for c in SILVER_KEY]
    expected: Counter[tuple[Any, ...]] = Counter()
    for row, times in (in_bronze - quarantined).items():
        expected[_silver_key_of_bronze(tuple(row[i] for i in positions))] += times
    actual = (
        Counter(_silver_key(r) for r in delta_files.row_tuples(silver, SILVER_KEY)) if silver is not None else Counter()
    )
    extra = actual - expected
    if extra:
        result.add(flow.silver, f"{sum(extra.values())} silver rows are not bronze rows, or are there more "
                   "times than in bronze (written twice)", _quote(SILVER_KEY, extra))
    lost = expected - actual
    if lost and not pending_ok:
        result.add(flow.silver, f"{sum(lost.values())} bronze rows are in neither silver nor quarantine "
                   "(lost)", _quote(SILVER_KEY, lost))
    if silver is not None and not result.violations:  # rows that disagree already say what is wrong
        routed_rows = silver.num_rows + sum(quarantined.values())
        _check_counted_once(result, flow.silver, paths[flow.silver], routed_rows, pending_ok=pending_ok)
    return result


def _check_counted_once(result: InvariantResult, name: str, path: Path, routed_rows: int, *,
                        pending_ok: bool) -> None:
    """Each routed batch's expectation counts were committed once, with its silver rows: the
    rows they checked add up to silver + quarantine (at most that with ``pending_ok``: a batch
    whose quarantine rows are committed and its silver rows not yet)."""
    checked = 0
    versions = delta_files.log_versions(path)
    if versions and versions[0].version > 0:
        return  # the oldest commits were cleaned away past the log's retention: their counts are gone
    for commit in versions:
        if not commit.transactions() or is_replay(commit):
            continue  # not a streaming batch (a schema change, a rewrite, a quarantine replay)
        counts = commit.recorded().get(EXPECTATIONS_KEY)
        if counts is None:
            return  # a batch written before expectations were counted: nothing to add up
        checked += ExpectationCounts.from_json(str(counts)).rows
    if checked > routed_rows or (checked < routed_rows and not pending_ok):
        how = "twice" if checked > routed_rows else "without its rows"
        result.add(name, f"its batches' expectation counts checked {checked} rows, but silver and quarantine "
                   f"hold {routed_rows}: a batch was counted {how}")


def _silver_key_of_bronze(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # Silver parses bronze's Unix seconds with from_unixtime: whole seconds.
    device_id, mrn, seconds, heartrate = row
    return (device_id, mrn, None if seconds is None or seconds == "NaN" else int(seconds), heartrate)


def _silver_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    device_id, mrn, time, heartrate = row
    return (device_id, mrn, None if time is None else int(_utc(time).timestamp()), heartrate)


# -- gold_recomputed ---------------------------------------------------------------------------
def check_gold_recomputed(settings: LakehouseSettings, flow: RecordFlow = REFERENCE_FLOW, *,
                          pending_ok: bool = False) -> InvariantResult:
    """daily_patient_avg and device_counts equal their logic (lakehouse_assets.assets.gold)
    recomputed in batch from silver and bronze."""
    result = InvariantResult(GOLD_RECOMPUTED, "each gold table equals a batch recomputation")
    if pending_ok:
        result.skipped = "gold may lag its sources while runs are pending"
        return result
    checked = 0
    silver_path = _table_path(settings, flow.silver)
    daily_path = _table_path(settings, flow.daily_patient_avg)
    if delta_files.is_table(silver_path):
        checked += 1
        silver = _read(result, flow.silver, silver_path, ["mrn", "name", "time", "heartrate"])
        gold = _read(result, flow.daily_patient_avg, daily_path, None) if delta_files.is_table(daily_path) else None
        if silver is not None and (gold is not None or not delta_files.is_table(daily_path)):
            _compare_daily(result, flow.daily_patient_avg, silver, gold)
    bronze_path = _table_path(settings, flow.bronze)
    counts_path = _table_path(settings, flow.device_counts)
    if delta_files.is_table(bronze_path):
        checked += 1
        bronze = _read(result, flow.bronze, bronze_path, ["device_id"])
        gold = _read(result, flow.device_counts, counts_path, None) if delta_files.is_table(counts_path) else None
        if bronze is not None and (gold is not None or not delta_files.is_table(counts_path)):
            _compare_device_counts(result, flow.device_counts, bronze, gold)
    if not checked:
        result.skipped = "no source tables yet"
    return result


def _compare_daily(result: InvariantResult, table: str, silver: Any, gold: Any) -> None:
    sums: dict[tuple[Any, ...], list[float]] = {}
    for mrn, name, time, heartrate in delta_files.row_tuples(silver, ["mrn", "name", "time", "heartrate"]):
        day = None if time is None else int(_utc(time).timestamp()) // _DAY * _DAY
        acc = sums.setdefault((mrn, name, day), [0.0, 0])
        if heartrate is not None:
            acc[0] += heartrate
            acc[1] += 1
    expected = {k: (s / n if n else None) for k, (s, n) in sums.items()}
    actual: dict[tuple[Any, ...], Any] = {}
    duplicated = []
    rows = delta_files.row_tuples(gold, ["mrn", "name", "date", "avg_heartrate"]) if gold is not None else ()
    for mrn, name, date, avg in rows:
        key = (mrn, name, None if date is None else int(_utc(date).timestamp()))
        if key in actual:
            duplicated.append(f"mrn={mrn} name={name!r} date={_day_text(key[2])}")
        actual[key] = avg
    _compare_groups(result, table, expected, actual, duplicated,
                    lambda k: f"mrn={k[0]} name={k[1]!r} date={_day_text(k[2])}", "avg_heartrate")


def _compare_device_counts(result: InvariantResult, table: str, bronze: Any, gold: Any) -> None:
    expected = dict(Counter(d for (d,) in delta_files.row_tuples(bronze, ["device_id"]) if d is not None))
    actual: dict[tuple[Any, ...], Any] = {}
    duplicated = []
    rows = delta_files.row_tuples(gold, ["device_id", "total_recordings"]) if gold is not None else ()
    for device_id, total in rows:
        if device_id in actual:
            duplicated.append(f"device_id={device_id}")
        actual[device_id] = total
    _compare_groups(result, table, expected, actual, duplicated, lambda k: f"device_id={k}", "total_recordings")


def _compare_groups(result: InvariantResult, table: str, expected: dict[Any, Any], actual: dict[Any, Any],
                    duplicated: list[str], describe: Callable[[Any], str], value: str) -> None:
    if duplicated:
        result.add(table, f"{len(duplicated)} groups appear more than once", duplicated)
    missing = [describe(k) + f" {value}={expected[k]}" for k in expected if k not in actual]
    extra = [describe(k) + f" {value}={actual[k]}" for k in actual if k not in expected]
    wrong = [f"{describe(k)}: {value}={actual[k]}, recomputed {expected[k]}"
             for k in expected if k in actual and not _close(actual[k], expected[k])]
    if missing:
        result.add(table, f"{len(missing)} groups of the recomputation are missing", missing)
    if extra:
        result.add(table, f"{len(extra)} groups have no source rows", extra)
    if wrong:
        result.add(table, f"{len(wrong)} groups differ from the recomputation", wrong)


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


# -- checkpoints_agree -------------------------------------------------------------------------
def check_checkpoints_agree(settings: LakehouseSettings, flow: RecordFlow = REFERENCE_FLOW) -> InvariantResult:
    """Every checkpoint under ``_checkpoints`` is readable and agrees with each table its
    query commits to: the table of its own name, the quarantine of a routed query, and any
    table whose log holds a batch of its query id."""
    from lakehouse_assets.errors import CheckpointMismatchError, CorruptCheckpointError
    from lakehouse_assets.storage import DeltaTableStore
    from lakehouse_assets.storage.checkpoint import Checkpoint

    result = InvariantResult(CHECKPOINTS_AGREE, "checkpoints and tables agree")
    base = settings.root / CHECKPOINTS_DIR
    folders = sorted(p for p in base.glob("*/*") if p.is_dir() and not p.name.startswith(".")) if base.is_dir() else []
    if not folders:
        result.skipped = "no checkpoints yet"
        return result
    store = DeltaTableStore()
    writers = _tables_by_query(settings)
    partners = {flow.silver: [flow.quarantine]}
    for folder in folders:
        name = f"{folder.parent.name}.{folder.name}"
        try:
            state = Checkpoint(str(folder), name).state()
        except CorruptCheckpointError as exc:
            result.add(name, str(exc))
            continue
        if state is None:
            continue
        tables = dict.fromkeys([name, *partners.get(name, []), *writers.get(state.query_id or "", [])])
        for table in tables:
            try:
                Checkpoint(str(folder), name).validate([str(_table_path(settings, table))], store)
            except CheckpointMismatchError as exc:
                result.add(table, str(exc))
            except Exception as exc:  # noqa: BLE001 - an unreadable table is versions_whole's finding too
                why = delta_files.error_summary(exc)
                result.add(table, f"cannot compare checkpoint {folder} with the table: {why}")
    return result


def _tables_by_query(settings: LakehouseSettings) -> dict[str, list[str]]:
    """For each streaming query id, the tables whose logs hold one of its batches."""
    found: dict[str, list[str]] = {}
    for name in discover_tables(settings.root):
        app_ids = {app for v in delta_files.log_versions(_table_path(settings, name)) for app, _ in v.transactions()}
        for app in app_ids:
            found.setdefault(app, []).append(name)
    return found


# -- shared ------------------------------------------------------------------------------------
def _table_path(settings: LakehouseSettings, name: str) -> Path:
    layer, table = name.split(".", 1)
    return settings.table_path(layer, table)


def _read(result: InvariantResult, name: str, path: Path, columns: list[str] | None) -> Any:
    """The table's rows, or None after recording why they cannot be read."""
    try:
        return delta_files.read_rows(path, columns)
    except Exception as exc:  # noqa: BLE001 - a damaged table is a finding, not a crash
        result.add(name, f"cannot read the table at {path}: {delta_files.error_summary(exc)}")
        return None


def _quote(columns: Iterable[str], rows: Counter[tuple[Any, ...]]) -> list[str]:
    names = list(columns)
    return [f"{dict(zip(names, row, strict=True))}" + (f" x{n}" if n > 1 else "") for row, n in list(rows.items())[:5]]


def _utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _day_text(seconds: int | None) -> str:
    return "null" if seconds is None else dt.datetime.fromtimestamp(seconds, dt.UTC).date().isoformat()


__all__ = [
    "BRONZE_ROUTED", "CHECKPOINTS_AGREE", "GOLD_RECOMPUTED", "LANDED_ONCE", "REFERENCE_FLOW",
    "VERSIONS_WHOLE", "RecordFlow", "check_all", "check_bronze_routed", "check_checkpoints_agree",
    "check_gold_recomputed", "check_landed_once", "check_table_whole", "check_versions_whole",
]
