"""Make a real lakehouse's tables look as if they had run many more micro-batches: each Delta
table of the root gets extra commits shaped like the ones its own writer makes for an empty
micro-batch, written directly as commit files (as :func:`benchmarks.many_batches.build_table`
does: committing 10,000 batches one by one through Spark takes hours), plus the log checkpoint
delta-rs would have written last.

What a padding commit holds, and why it breaks nothing the real queries rely on:

- the ``lakehouse.*`` commit metadata (Delta's ``userMetadata``,
  :mod:`lakehouse_assets.storage.batch_record`) of the table's own newest commit (operation,
  output mode, what its run read), with the batch's own query, batch and run;
  expectation counts, when the table's commits carry them, count zero rows (so silver's counts
  still add up to its rows); Delta's ``operationMetrics`` say zero rows written;
- no data file: an empty batch. Rows would have to be landed records (bronze), routed bronze rows
  (silver, quarantine) or a recomputation (gold) for the invariants to hold; what grows with
  micro-batches, the log, grows all the same;
- an app transaction of :data:`PAD_APP`, a query of its own, when the table's commits record one
  (a batch write such as the patients lookup records none): each real query's last committed
  batch stays what it was. A table written by Delta's own streaming sink names the query and
  batch in the commit's ``operationParameters`` (``queryId``, ``epochId``) as that sink does;
  one written by the lakehouse's ``foreachBatch`` sink names them in its ``userMetadata``;
- the run :data:`PAD_RUN`, which no Dagster run is, so no materialization says it completed:
  whoever asks how far a table had read looks past the padding commits to a completed run's.

The event log (``system.event_log``) is a view over the tables' commits
(:mod:`lakehouse_assets.tables.event_log`): padding the tables pads it. Spark's checkpoints are
not padded: they keep the few batches the real runs made.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from lakehouse_assets.location import locate
from lakehouse_assets.quality.expectations import ExpectationCounts
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage.batch_record import (
    BATCH_KEY,
    BATCH_METADATA_PREFIX,
    EXPECTATIONS_KEY,
    QUERY_KEY,
    RUN_KEY,
    parse_metadata,
    user_metadata,
)
from lakehouse_assets.storage.discovery import discover_tables

#: The padding's own query: its app id in every padded table, never a real query's.
PAD_APP = "padding-benchmark-query"
#: The run named in padding commits: ``run_commits`` reads a table's history newest first
#: until another run's commit, so a real run never counts a padding commit as its own.
PAD_RUN = "padding-benchmark-run"
CHECKPOINT_INTERVAL = 100  # delta.checkpointInterval: delta-rs checkpoints when (version + 1) % 100 == 0
DELTA_LOG = "_delta_log"
#: Delta's operation for a commit of its own streaming sink.
STREAMING_UPDATE = "STREAMING UPDATE"


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
    (``layer.name/_cdc_state``) included: a real micro-batch commits to them too."""
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
    table under ``root``."""
    return [pad_table(name, path, commits) for name, path in table_folders(root).items()]


def pad_table(name: str, path: Path, commits: int) -> PaddedTable:
    """``commits`` empty batches on the table at ``path``, shaped like its newest commit."""
    started = time.perf_counter()
    latest = DeltaTable(str(path)).version()
    info = _newest_commit_info(path, latest)
    parameters = info.get("operationParameters") or {}
    recorded = parse_metadata(info.get("userMetadata"))
    delta_sink = info.get("operation") == STREAMING_UPDATE and "epochId" in parameters
    with_txn = QUERY_KEY in recorded or delta_sink
    custom = {k: v for k, v in recorded.items() if not k.startswith(BATCH_METADATA_PREFIX)}
    if EXPECTATIONS_KEY in recorded:  # an empty batch's counts: zero rows checked by each rule
        failed = ExpectationCounts.from_json(str(recorded[EXPECTATIONS_KEY])).failed
        custom[EXPECTATIONS_KEY] = ExpectationCounts(0, dict.fromkeys(failed, 0)).to_json()
    custom[RUN_KEY] = PAD_RUN
    for batch in range(1, commits + 1):
        if delta_sink:  # Delta's own sink: the query and batch in the commit's parameters
            commit = _commit_info(info, custom, STREAMING_UPDATE,
                                  {"outputMode": parameters.get("outputMode", "Append"), "queryId": PAD_APP,
                                   "epochId": str(batch)})
        else:
            commit = _commit_info(info, {**custom, **({QUERY_KEY: PAD_APP, BATCH_KEY: batch} if with_txn else {})},
                                  "WRITE", {"mode": "Append", "partitionBy": "[]"})
        lines: list[dict[str, Any]] = [{"commitInfo": commit}]
        if with_txn:
            lines.append({"txn": {"appId": PAD_APP, "version": batch}})
        _write_commit(path, latest + batch, lines)
    checkpoint = _checkpoint(path, latest, latest + commits)
    return PaddedTable(name, latest + 1, latest + commits, checkpoint, with_txn, time.perf_counter() - started)


def _newest_commit_info(path: Path, version: int) -> dict[str, Any]:
    for line in (path / DELTA_LOG / f"{version:020d}.json").read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            return dict(action["commitInfo"])
    return {}


def _commit_info(template: dict[str, Any], custom: dict[str, Any], operation: str,
                 parameters: dict[str, Any]) -> dict[str, Any]:
    """A blind append's commitInfo writing no file, by the engine of ``template``, recording
    ``custom`` in its ``userMetadata`` and zero rows in its metrics."""
    return {"timestamp": int(time.time() * 1000), "operation": operation, "operationParameters": parameters,
            **({"engineInfo": template["engineInfo"]} if "engineInfo" in template else {}),
            "isBlindAppend": True,
            "operationMetrics": {"numFiles": "0", "numOutputRows": "0", "numOutputBytes": "0"},
            "userMetadata": user_metadata(custom)}


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
