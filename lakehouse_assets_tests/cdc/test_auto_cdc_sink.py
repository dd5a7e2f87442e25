"""AUTO CDC into SCD type 1 and 2 tables: late, duplicate and deleted changes, replays and
crashes, against an independent computation, through a real SparkSession and real tables."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.cdc import AutoCdc, AutoCdcSink
from lakehouse_assets.cdc.sink import STATE_FOLDER
from lakehouse_assets.errors import ConfigurationError, LakehouseError
from lakehouse_assets.storage import DeltaSink, DeltaTableStore, TableLayout
from lakehouse_assets.storage.delta import CHANGE_DATA_FEED
from lakehouse_assets_tests.conftest import spark_jobs
from lakehouse_assets_tests.storage.helpers import as_query, drop_commit

from . import reference

CHANGES_SCHEMA = "mrn int, name string, city string, op string, seq int"
DELETES = "op = 'DELETE'"


def _spec(scd_type: int, **extra: Any) -> AutoCdc:
    return AutoCdc(keys=["mrn"], sequence_by="seq", stored_as_scd_type=scd_type,  # type: ignore[arg-type]
                   apply_as_deletes=DELETES, except_column_list=["op", "seq"], **extra)


@pytest.fixture(autouse=True)
def in_a_query(spark: SparkSession) -> Iterator[str]:
    """The test's batches, handed to the sinks by the test itself, as one streaming query's:
    their commits record its id."""
    with as_query(spark) as query_id:
        yield query_id


def _sink(store: DeltaTableStore, tmp_path: Path, name: str, spec: AutoCdc,
          properties: dict[str, str] | None = None) -> AutoCdcSink:
    return AutoCdcSink(DeltaSink(store, str(tmp_path / name), output_mode="update",
                                 keys=list(spec.keys), layout=TableLayout(properties or {})), spec)


def _frame(spark: SparkSession, changes: Sequence[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame([(c["mrn"], c["name"], c["city"], c["op"], c["seq"]) for c in changes],
                                 CHANGES_SCHEMA)


def _rows(spark: SparkSession, store: DeltaTableStore, path: str, order: Sequence[str]) -> list[dict[str, Any]]:
    rows = [r.asDict() for r in store.read(spark, path).collect()]
    return sorted(rows, key=lambda r: tuple(r[c] for c in order))


def _changes(seed: int, keys: int = 10, count: int = 48) -> list[dict[str, Any]]:
    """Changes to ``keys`` patients, unique sequence values per key, about one in five a delete;
    names repeat, so some upserts change nothing tracked."""
    rng = random.Random(seed)
    sequences = rng.sample(range(1, 10 * count), count)
    return [{"mrn": rng.randrange(keys), "name": rng.choice(["Ada", "Bo", "Cy"]), "city": rng.choice(["Oslo", "Rome"]),
             "op": "DELETE" if rng.random() < 0.2 else "UPSERT", "seq": seq} for seq in sequences]


def test_both_types_match_an_independent_computation_batch_by_batch(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    changes = _changes(seed=7, count=36)
    # Three batches arriving in no particular order of sequence: most keys see late changes,
    # across batches and within one.
    batches = [changes[i:i + 12] for i in range(0, len(changes), 12)]
    current = _sink(store, tmp_path, "current", _spec(1))
    history = _sink(store, tmp_path, "history", _spec(2))
    seen: list[dict[str, Any]] = []
    for batch_id, batch in enumerate(batches):
        for sink in (current, history):
            sink(_frame(spark, batch), batch_id)
            with spark_jobs(spark) as replay_jobs:
                sink(_frame(spark, batch), batch_id)  # a replay of the batch changes nothing
            assert replay_jobs == [], "a replay of a batch the table and its state hold runs no Spark job"
        seen += batch
        assert _rows(spark, store, current.sink.path, ["mrn"]) == reference.scd1(seen), f"after batch {batch_id}"
        assert _rows(spark, store, history.sink.path, ["mrn", "__START_AT"]) == reference.scd2(seen), \
            f"after batch {batch_id}"
    # One commit per batch (the replays were skipped), each naming its batch.
    assert [h.batch_id for h in store.history(history.sink.path)] == list(range(len(batches)))[::-1]
    # Standard Delta tables: another reader (delta-rs) sees the same rows.
    for path, order in ((current.sink.path, ["mrn"]), (history.sink.path, ["mrn", "__START_AT"])):
        other = pa.table(DeltaTable(path).to_pyarrow_table()).to_pylist()
        assert sorted(other, key=lambda r: tuple(r[c] for c in order)) == _rows(spark, store, path, order)


def test_a_late_upsert_older_than_a_delete_does_not_bring_the_row_back(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    current = _sink(store, tmp_path, "current", _spec(1))
    history = _sink(store, tmp_path, "history", _spec(2))
    batches = [
        [{"mrn": 1, "name": "Ada", "city": "Oslo", "op": "UPSERT", "seq": 1},
         {"mrn": 1, "name": None, "city": None, "op": "DELETE", "seq": 5}],
        [{"mrn": 1, "name": "Ada L.", "city": "Oslo", "op": "UPSERT", "seq": 3}],  # late: before the delete
    ]
    for batch_id, batch in enumerate(batches):
        current(_frame(spark, batch), batch_id)
        history(_frame(spark, batch), batch_id)
    assert _rows(spark, store, current.sink.path, ["mrn"]) == []
    # In history the late version is slotted in between, and the delete still closes it.
    assert _rows(spark, store, history.sink.path, ["mrn", "__START_AT"]) == [
        {"mrn": 1, "name": "Ada", "city": "Oslo", "__START_AT": 1, "__END_AT": 3},
        {"mrn": 1, "name": "Ada L.", "city": "Oslo", "__START_AT": 3, "__END_AT": 5},
    ]


def test_only_tracked_columns_open_a_version(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    changes = _changes(seed=11)
    history = _sink(store, tmp_path, "history", _spec(2, track_history_column_list=["name"]))
    for batch_id, start in enumerate(range(0, len(changes), 16)):
        history(_frame(spark, changes[start:start + 16]), batch_id)
    expected = reference.scd2(changes, tracked=["name"])
    assert _rows(spark, store, history.sink.path, ["mrn", "__START_AT"]) == expected
    assert len(expected) < len(reference.scd2(changes)), "the data should hold city-only changes"


def test_a_batch_rewrites_only_the_files_holding_its_keys(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    current = _sink(store, tmp_path, "current", _spec(1))
    for batch_id in range(4):  # four batches, four files, keys 10*b .. 10*b+9
        current(_frame(spark, [{"mrn": 10 * batch_id + i, "name": "Ada", "city": "Oslo", "op": "UPSERT", "seq": 1}
                               for i in range(10)]).coalesce(1), batch_id)
    assert len(store.snapshot(current.sink.path).files()) == 4
    current(_frame(spark, [{"mrn": 23, "name": "Bo", "city": "Rome", "op": "UPSERT", "seq": 2}]), 4)

    commit = _last_commit(Path(current.sink.path))
    assert len(commit["remove"]) == 1 and len(commit["add"]) >= 1
    assert sum(json.loads(a["stats"])["numRecords"] for a in commit["add"]) == 10  # the one file's rows
    rows = _rows(spark, store, current.sink.path, ["mrn"])
    assert len(rows) == 40 and rows[23] == {"mrn": 23, "name": "Bo", "city": "Rome"}


def test_a_crash_between_the_table_and_its_state_loses_and_repeats_nothing(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    changes = _changes(seed=3)
    batches = [changes[i:i + 16] for i in range(0, len(changes), 16)]
    current = _sink(store, tmp_path, "current", _spec(1), {CHANGE_DATA_FEED: "true"})
    current(_frame(spark, batches[0]), 0)
    current(_frame(spark, batches[1]), 1)
    # Crash after the table's commit of batch 1, before its state's: the state's commit is gone.
    _drop_last_commit(Path(current.table.state_path))
    current(_frame(spark, batches[1]), 1)  # Spark replays the batch
    assert _rows(spark, store, current.sink.path, ["mrn"]) == reference.scd1(batches[0] + batches[1])
    # Crash in the middle of batch 2's merge, before either commit: files may be written, none is committed.
    current(_frame(spark, batches[2]), 2)
    _drop_last_commit(Path(current.table.state_path))
    _drop_last_commit(Path(current.sink.path))
    current(_frame(spark, batches[2]), 2)
    assert _rows(spark, store, current.sink.path, ["mrn"]) == reference.scd1(changes)
    state = _rows(spark, store, current.table.state_path, ["mrn"])
    assert [s["mrn"] for s in state] == sorted({c["mrn"] for c in changes}), "one state row per key ever seen"
    # The table's change data feed, replayed in order, is the table: no change lost or repeated.
    feed = pa.table(DeltaTable(current.sink.path).load_cdf().read_all()).to_pylist()
    replayed: dict[int, dict[str, Any]] = {}
    order = {"delete": 0, "update_preimage": 1, "update_postimage": 2, "insert": 2}
    for change in sorted(feed, key=lambda c: (c["_commit_version"], order[c["_change_type"]])):
        if change["_change_type"] == "delete":
            assert replayed.pop(change["mrn"]) == {k: change[k] for k in ("mrn", "name", "city")}
        elif change["_change_type"] == "update_preimage":
            assert replayed[change["mrn"]] == {k: change[k] for k in ("mrn", "name", "city")}
        else:
            assert (change["mrn"] in replayed) == (change["_change_type"] == "update_postimage")
            replayed[change["mrn"]] = {k: change[k] for k in ("mrn", "name", "city")}
    assert sorted(replayed.values(), key=lambda r: r["mrn"]) == reference.scd1(changes)


def test_a_truncate_empties_what_came_before_it(spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    spec = AutoCdc(keys=["mrn"], sequence_by="seq", apply_as_deletes=DELETES, apply_as_truncates="op = 'TRUNCATE'",
                   except_column_list=["op", "seq"])
    current = _sink(store, tmp_path, "current", spec)
    current(_frame(spark, [{"mrn": m, "name": "Ada", "city": "Oslo", "op": "UPSERT", "seq": 1} for m in range(3)]), 0)
    current(_frame(spark, [{"mrn": 0, "name": "Bo", "city": "Rome", "op": "UPSERT", "seq": 9},
                           {"mrn": None, "name": None, "city": None, "op": "TRUNCATE", "seq": 5},
                           {"mrn": 1, "name": "Cy", "city": "Rome", "op": "UPSERT", "seq": 4}]), 1)
    # Key 0's change after the truncate stays; key 1's before it is void, as are the older rows.
    assert _rows(spark, store, current.sink.path, ["mrn"]) == [{"mrn": 0, "name": "Bo", "city": "Rome"}]


def test_a_change_without_key_or_sequence_is_refused(
        spark: SparkSession, store: DeltaTableStore, tmp_path: Path) -> None:
    current = _sink(store, tmp_path, "current", _spec(1))
    with pytest.raises(LakehouseError, match=r"no value for its key \['mrn'\] or its sequence column 'seq'"):
        current(_frame(spark, [{"mrn": 1, "name": "Ada", "city": "Oslo", "op": "UPSERT", "seq": None}]), 0)
    assert not store.exists(current.sink.path)


@pytest.mark.parametrize("settings, message", [
    ({"keys": []}, "at least one key"),
    ({"stored_as_scd_type": 2, "apply_as_truncates": "op = 'T'"}, "SCD type 1 tables only"),
    ({"track_history_column_list": ["name"]}, "SCD type 2 tables only"),
    ({"except_column_list": ["mrn"]}, "names key columns"),
])
def test_a_spec_that_cannot_work_is_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        AutoCdc(**{"keys": ["mrn"], "sequence_by": "seq", **settings})


def _commit_files(table: Path) -> list[Path]:
    return sorted((table / "_delta_log").glob("*.json"))


def _last_commit(table: Path) -> dict[str, list[dict[str, Any]]]:
    actions: dict[str, list[dict[str, Any]]] = {"add": [], "remove": []}
    for line in _commit_files(table)[-1].read_text().splitlines():
        action = json.loads(line)
        for kind in actions:
            if kind in action:
                actions[kind].append(action[kind])
    return actions


def _drop_last_commit(table: Path) -> None:
    drop_commit(_commit_files(table)[-1])
    for leftover in (table / "_delta_log").glob("_last_checkpoint"):
        leftover.unlink()


assert STATE_FOLDER == "_cdc_state"
