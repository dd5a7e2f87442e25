"""The ``routed`` invariant: for every routed table, its source = table + quarantine, record
for record, rows known by where they landed (``_source_file``, ``_source_line``); a table whose
rows do not carry that identity is held to the count. The expectation counts committed with the
table's batches must have checked exactly those rows, once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.location import Location
from lakehouse_assets.quality.expectations import EXPECTATIONS_KEY, ExpectationCounts
from lakehouse_assets.reliability import table_reader
from lakehouse_assets.reliability.flows import Flows, Routing
from lakehouse_assets.reliability.replayed import is_replay, owed_to_table
from lakehouse_assets.reliability.report import SAMPLE_SIZE, InvariantResult, quote
from lakehouse_assets.reliability.table_reader import read_or_report, table_path
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage.discovery import is_table

ROUTED = "routed"
#: How a record is known in a source, its table and its quarantine: where it landed.
RECORD_IDENTITY = (SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN)


def check_routed(settings: LakehouseSettings, flows: Flows, *, pending_ok: bool = False) -> InvariantResult:
    """Source = table + quarantine for every routed table (with ``pending_ok``: the table and
    the quarantine hold only source records, each at most once)."""
    result = InvariantResult(ROUTED, "source = table + quarantine, record for record, for every routed table")
    for routing in flows.routings:
        if is_table(table_path(settings, routing.source)):
            result.checked.append(routing.table)
            _check_routing(result, settings, routing, pending_ok=pending_ok)
    if not result.checked:
        result.skipped = "no routed table's source exists yet" if flows.routings else "no routed table"
    return result


def _check_routing(result: InvariantResult, settings: LakehouseSettings, routing: Routing, *,
                   pending_ok: bool) -> None:
    names = (routing.source, routing.table, routing.quarantine)
    paths = {name: table_path(settings, name) for name in names}
    tables: dict[str, Any] = {}
    for name in names:
        if is_table(paths[name]):
            tables[name] = read_or_report(result, settings, name, None)
            if tables[name] is None:
                return
    source: Any = tables[routing.source]
    table, quarantine = tables.get(routing.table), tables.get(routing.quarantine)
    if not pending_ok and source.num_rows and (table is None or quarantine is None):
        absent = [n for n in (routing.table, routing.quarantine) if tables.get(n) is None]
        result.add(routing.source, f"{source.num_rows} {routing.source} rows but no table {' or '.join(absent)}")
        return
    kept_rows = table.num_rows if table is not None else 0
    if not _has_identity(source) or (quarantine is not None and not _has_identity(quarantine)):
        # Rows without an identity cannot be told apart: held to the count.
        quarantined_rows = quarantine.num_rows if quarantine is not None else 0
        _check_count(result, routing, kept_rows + quarantined_rows - source.num_rows, pending_ok=pending_ok)
        if table is not None and not result.violations:
            _check_counted_once(result, routing.table, paths[routing.table], kept_rows + quarantined_rows,
                                pending_ok=pending_ok)
        return
    rows_of = {identity: row for row, identity in _rows_with_identity(source)}
    in_source = Counter(identity for _, identity in _rows_with_identity(source))
    owed = owed_to_table(paths[routing.table], paths[routing.quarantine], RECORD_IDENTITY) \
        if table is not None and _has_identity(table) else Counter()
    quarantined = +(Counter(identity for _, identity in _rows_with_identity(quarantine)) - owed) \
        if quarantine is not None else Counter()
    invented = quarantined - in_source
    if invented:
        result.add(routing.quarantine, f"{sum(invented.values())} quarantined rows are not {routing.source} rows, "
                   "or are there more times (quarantined twice)", quote(RECORD_IDENTITY, invented))
    expected = in_source - quarantined
    if table is not None and _has_identity(table):
        kept = Counter(identity for _, identity in _rows_with_identity(table))
        extra, lost = kept - expected, expected - kept
        _report(result, routing, sum(extra.values()), sum(lost.values()), _quoted(extra, rows_of, source),
                _quoted(lost, rows_of, source), pending_ok=pending_ok)
    else:  # the table's rows carry no identity: held to the count
        _check_count(result, routing, kept_rows - sum(expected.values()), pending_ok=pending_ok)
    if table is not None and not result.violations:  # rows that disagree already say what is wrong
        _check_counted_once(result, routing.table, paths[routing.table], kept_rows + sum(quarantined.values()),
                            pending_ok=pending_ok)


def _check_count(result: InvariantResult, routing: Routing, surplus: int, *, pending_ok: bool) -> None:
    """Table + quarantine hold ``surplus`` rows more than the source (fewer when negative)."""
    _report(result, routing, max(surplus, 0), max(-surplus, 0), [], [], pending_ok=pending_ok)


def _report(result: InvariantResult, routing: Routing, extra: int, lost: int, extra_rows: list[str],
            lost_rows: list[str], *, pending_ok: bool) -> None:
    if extra:
        result.add(routing.table, f"{extra} {routing.table} rows are not {routing.source} rows, or are there "
                   f"more times than in {routing.source} (written twice)", extra_rows)
    if lost and not pending_ok:
        result.add(routing.table, f"{lost} {routing.source} rows are in neither {routing.table} nor "
                   f"{routing.quarantine} (lost)", lost_rows)


def _has_identity(rows: Any) -> bool:
    return all(column in rows.column_names for column in RECORD_IDENTITY)


def _rows_with_identity(rows: Any) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    columns = list(rows.column_names)
    positions = [columns.index(c) for c in RECORD_IDENTITY]
    return [(row, tuple(row[i] for i in positions)) for row in table_reader.row_tuples(rows, columns)]


def _quoted(identities: Counter[Any], rows_of: dict[Any, tuple[Any, ...]], source: Any) -> list[str]:
    """Each of ``identities`` as its source row, or as the identity alone when the source has none."""
    columns = list(source.column_names)
    return [quote(columns, Counter({rows_of[i]: n})) [0] if i in rows_of else quote(RECORD_IDENTITY, Counter({i: n}))[0]
            for i, n in list(identities.items())[:SAMPLE_SIZE]]


def _check_counted_once(result: InvariantResult, name: str, path: Location, routed_rows: int, *,
                        pending_ok: bool) -> None:
    """Each routed batch's expectation counts were committed once, with its rows: the rows
    they checked add up to table + quarantine (at most that with ``pending_ok``: a batch
    whose quarantine rows are committed and its table rows not yet)."""
    checked = 0
    commits = table_reader.history(path)
    if commits and commits[0].version > 0:
        return  # the oldest commits were cleaned away past the log's retention: their counts are gone
    for commit in commits:
        if commit.batch_id is None or is_replay(commit):
            continue  # not a streaming batch (a schema change, a rewrite, a quarantine replay)
        counts = commit.custom_metadata.get(EXPECTATIONS_KEY)
        if counts is None:
            return  # a batch written before expectations were counted: nothing to add up
        checked += ExpectationCounts.from_json(str(counts)).rows
    if checked > routed_rows or (checked < routed_rows and not pending_ok):
        how = "twice" if checked > routed_rows else "without its rows"
        result.add(name, f"its batches' expectation counts checked {checked} rows, but {name} and its quarantine "
                   f"hold {routed_rows}: a batch was counted {how}")
