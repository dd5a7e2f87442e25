"""Make a real lakehouse's tables look as if they had run many more micro-batches: each Delta
table of the root gets extra commits shaped like the ones its own writer makes for an empty
micro-batch, written directly as commit files (as :func:`benchmarks.many_batches.build_table`
does: committing 10,000 batches one by one through delta-rs takes the better part of an hour),
plus the log checkpoint delta-rs would have written last.

What a padding commit holds, and why it breaks nothing the real queries rely on:

- the ``lakehouse.*`` commit metadata of the table's own newest commit (operation, output mode,
  aggregate), with the batch's own query, batch, run and zero rows; expectation counts, when the
  table's commits carry them, count zero rows (so silver's counts still add up to its rows);
- no data file: an empty batch. Rows would have to be landed records (bronze), routed bronze rows
  (silver, quarantine) or a recomputation (gold) for the invariants to hold; what grows with
  micro-batches, the log, grows all the same;
- an app transaction of :data:`PAD_APP`, a query of its own, when the table's commits record one
  (a batch write such as the patients lookup records none): each real query's last committed
  batch, which its checkpoint is checked against, stays what it was;
- the event log gets one commit per padded batch with one ``committed`` row for each streaming
  table's padded batch, so every batch the tables record is in the event log once, as
  ``events_once`` wants. (A real run appends to the event log once per table, so a real event
  log after N runs has about four times N commits: here it has N.)

Spark's checkpoints are not padded: they keep the few batches the real runs made.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from lakehouse_assets.location import locate
from lakehouse_assets.quality.expectations import EXPECTATIONS_KEY, ExpectationCounts
from lakehouse_assets.settings import CHECKPOINTS_DIR, LakehouseSettings
from lakehouse_assets.storage.delta import META_BATCH, META_OPERATION, META_QUERY, META_ROWS
from lakehouse_assets.storage.discovery import discover_tables
from lakehouse_assets.storage.engine import BATCH_METADATA_PREFIX
from lakehouse_assets.storage.event_log import EVENT_LOG_SCHEMA, EVENT_LOG_TABLE, query_app_id
from lakehouse_assets.storage.maintenance import optimize
from lakehouse_assets.storage.sink import OFFSETS_KEY, RUN_KEY

#: The padding's own query: its app id in every padded table, never a real query's.
PAD_APP = "padding-benchmark-query"
#: The run named in padding commits: ``run_commits`` reads a table's history newest first
#: until another run's commit, so a real run never counts a padding commit as its own.
PAD_RUN = "padding-benchmark-run"
CHECKPOINT_INTERVAL = 100  # delta.checkpointInterval: delta-rs checkpoints when (version + 1) % 100 == 0
DELTA_LOG = "_delta_log"


@dataclass(frozen=True)
class PaddedTable:
    """What padding one table did."""

    table: str
    first_padded_version: int
    last_version: int
    log_checkpoint: int | None
    transactions: bool
    seconds: float


def table_folders(root: Path) -> dict[str, Path]:
    """Every Delta table under ``root`` by name, the state tables kept inside a table
    (``layer.name/_aggregate_state``) included: a real micro-batch commits to them too."""
    settings = LakehouseSettings(locate(root))
    found: dict[str, Path] = {}
    for name in discover_tables(settings.root):
        path = Path(settings.table_path(*name.split(".", 1)))
        found[name] = path
        for inner in sorted(p for p in path.iterdir() if p.name.startswith("_") and (p / DELTA_LOG).is_dir()):
            found[f"{name}/{inner.name}"] = inner
    return found


def log_file_counts(root: Path) -> dict[str, int]:
    """How many files each table's ``_delta_log`` holds."""
    return {name: sum(1 for _ in (path / DELTA_LOG).iterdir()) for name, path in table_folders(root).items()}


def data_file_counts(root: Path) -> dict[str, int]:
    """How many data files each table's latest version lists."""
    return {name: len(DeltaTable(str(path)).file_uris()) for name, path in table_folders(root).items()}


def pad_lakehouse(root: Path, commits: int) -> list[PaddedTable]:
    """Add ``commits`` empty micro-batches (batches 1..``commits`` of :data:`PAD_APP`) to every
    table under ``root``, and their events to the event log."""
    tables = table_folders(root)
    streaming = {name for name in tables if "/" not in name and _has_checkpoint(root, name)}
    padded: list[PaddedTable] = []
    events: dict[str, list[int]] = {}  # streaming table -> the version each padded batch got
    for name, path in tables.items():
        if name == EVENT_LOG_TABLE:
            continue
        result = pad_table(name, path, commits)
        padded.append(result)
        if name in streaming and result.transactions:
            events[name] = list(range(result.first_padded_version, result.last_version + 1))
    if EVENT_LOG_TABLE in tables:
        padded.append(pad_event_log(tables[EVENT_LOG_TABLE], commits, events))
    return padded


def pad_table(name: str, path: Path, commits: int) -> PaddedTable:
    """``commits`` empty batches on the table at ``path``, shaped like its newest commit."""
    started = time.perf_counter()
    latest = DeltaTable(str(path)).version()
    info = _newest_commit_info(path, latest)
    with_txn = META_QUERY in info
    custom = {k: v for k, v in info.items() if k.startswith("lakehouse.") and not k.startswith(BATCH_METADATA_PREFIX)}
    custom.pop(OFFSETS_KEY, None)  # the real query's offsets: checkpoint repair reads them
    if EXPECTATIONS_KEY in info:  # an empty batch's counts: zero rows checked by each rule
        failed = ExpectationCounts.from_json(str(info[EXPECTATIONS_KEY])).failed
        custom[EXPECTATIONS_KEY] = ExpectationCounts(0, dict.fromkeys(failed, 0)).to_json()
    custom[RUN_KEY], custom[META_ROWS] = PAD_RUN, 0
    for batch in range(1, commits + 1):
        lines: list[dict[str, Any]] = [{"commitInfo": _commit_info(info, {
            **custom, **({META_QUERY: PAD_APP, META_BATCH: batch} if with_txn else {})})}]
        if with_txn:
            lines.append({"txn": {"appId": PAD_APP, "version": batch}})
        _write_commit(path, latest + batch, lines)
    checkpoint = _checkpoint(path, latest, latest + commits)
    return PaddedTable(name, latest + 1, latest + commits, checkpoint, with_txn, time.perf_counter() - started)


def pad_event_log(path: Path, commits: int, versions: dict[str, list[int]]) -> PaddedTable:
    """``commits`` appends to the event log, append ``b`` holding batch ``b`` of each padded
    streaming table (``versions``: the table version each batch got) as ``committed``, with the
    app transaction the log records each table's batches under."""
    started = time.perf_counter()
    latest = DeltaTable(str(path)).version()
    info = _newest_commit_info(path, latest)
    now = dt.datetime.now(dt.UTC)
    for batch in range(1, commits + 1):
        rows: list[dict[str, Any]] = [{"run_id": PAD_RUN, "table": table, "query_id": PAD_APP, "batch_id": batch,
                 "table_version": table_versions[batch - 1], "input_rows": 0, "output_rows": 0,
                 "quarantined_rows": None, "expectations": [],
                 "started_at": now, "duration_ms": 0, "status": "committed", "error": None, "recorded_at": now}
                for table, table_versions in versions.items()]
        name = f"part-00000-padding-{batch:06d}-c000.snappy.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=EVENT_LOG_SCHEMA), path / name)
        apps = [query_app_id(table, PAD_APP) for table in versions]
        custom = {META_OPERATION: "APPEND EVENTS", META_ROWS: len(rows), META_BATCH: batch,
                  **({META_QUERY: apps[0]} if apps else {})}
        millis = int(time.time() * 1000)
        add = {"path": name, "partitionValues": {}, "size": (path / name).stat().st_size, "modificationTime": millis,
               "dataChange": True, "stats": _stats(rows), "tags": None, "baseRowId": None,
               "defaultRowCommitVersion": None, "clusteringProvider": None}
        lines: list[dict[str, Any]] = [{"commitInfo": _commit_info(info, custom)}, {"add": add}]
        lines += [{"txn": {"appId": app, "version": batch}} for app in apps]
        _write_commit(path, latest + batch, lines)
    checkpoint = _checkpoint(path, latest, latest + commits)
    # The log compacts its small files every COMPACT_EVERY appends (storage/event_log.py): after
    # that many appends it holds their rows in a compacted file, as after its last compaction.
    optimize(DeltaTable(str(path)), str(path))
    return PaddedTable(EVENT_LOG_TABLE, latest + 1, latest + commits, checkpoint, True, time.perf_counter() - started)


def _stats(rows: list[dict[str, Any]]) -> str:
    """A file's statistics as delta-rs writes them, for its string and integer columns (a reader
    filtering the event log by table or run could skip files by them, as it could real ones)."""
    plain = [f.name for f in EVENT_LOG_SCHEMA if pa.types.is_string(f.type) or pa.types.is_integer(f.type)]
    values = {c: [r[c] for r in rows if r[c] is not None] for c in plain}
    return json.dumps({"numRecords": len(rows),
                       "minValues": {c: min(v) for c, v in values.items() if v},
                       "maxValues": {c: max(v) for c, v in values.items() if v},
                       "nullCount": {c: len(rows) - len(v) for c, v in values.items()}}, separators=(",", ":"))


def _has_checkpoint(root: Path, name: str) -> bool:
    layer, table = name.split(".", 1)
    return (root / CHECKPOINTS_DIR / layer / table).is_dir()


def _newest_commit_info(path: Path, version: int) -> dict[str, Any]:
    for line in (path / DELTA_LOG / f"{version:020d}.json").read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            return dict(action["commitInfo"])
    return {}


def _commit_info(template: dict[str, Any], custom: dict[str, Any]) -> dict[str, Any]:
    """A delta-rs append's commitInfo (the same fields in the same order) with ``custom``."""
    return {"timestamp": int(time.time() * 1000), "operation": "WRITE",
            "operationParameters": {"mode": "Append", "partitionBy": "[]"},
            "engineInfo": template.get("engineInfo", "delta-rs:py-1.6.6"),
            "clientVersion": template.get("clientVersion", "delta-rs.py-1.6.6"), **custom}


def _write_commit(path: Path, version: int, lines: list[dict[str, Any]]) -> None:
    target = path / DELTA_LOG / f"{version:020d}.json"
    if target.exists():  # a commit file is never overwritten: that would rewrite history
        raise FileExistsError(target)
    target.write_text("\n".join(json.dumps(line, separators=(",", ":")) for line in lines))


def _checkpoint(path: Path, before: int, last: int) -> int | None:
    """Write the log checkpoint delta-rs would have written last among versions
    ``before``+1..``last`` (the one a reader starts from), if any."""
    version = ((last + 1) // CHECKPOINT_INTERVAL) * CHECKPOINT_INTERVAL - 1
    if version <= before:
        return None
    DeltaTable(str(path), version=version).create_checkpoint()
    return version


def as_rows(padded: list[PaddedTable]) -> list[dict[str, Any]]:
    """The padding's facts, JSON-ready."""
    return [{**asdict(p), "seconds": round(p.seconds, 2)} for p in padded]
