"""Damaged checkpoints, and checkpoints behind or ahead of their tables: the run stops with an
error naming the checkpoint and the recovery, and `lakehouse repair` gets the pipeline going
again without a full refresh, with every landed record in bronze once and nothing lost."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakehouse_assets.checkpoints.logs import batch_ids
from lakehouse_assets.cli import main as lakehouse
from lakehouse_assets.errors import CorruptCheckpointError
from lakehouse_assets.location import locate
from lakehouse_assets.quality.freshness import FreshnessPath, data_lag
from lakehouse_assets.reliability.invariants import check_all
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaSink
from lakehouse_assets.storage.event_log import event_log_path, logged_offsets
from lakehouse_assets.storage.sink import OFFSETS_KEY
from lakehouse_assets.streaming import run_stream
from lakehouse_assets_tests.assets.pipeline import SEED_WITHOUT_CHECKS, delta_rows, materialize
from lakehouse_assets_tests.storage.helpers import drop_commit

SILVER = ["silver/recordings_enriched", "silver/recordings_quarantine"]


def failure_text(exc: BaseException) -> str:
    """The messages of an error and of every error it came from."""
    texts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(texts)


def latest(folder: Path) -> Path:
    return folder / str(batch_ids(locate(str(folder)))[-1])


def assert_stops_naming(selection, checkpoint: Path, table: str, *words: str) -> None:
    with pytest.raises(Exception) as info:
        materialize(selection)
    text = failure_text(info.value)
    assert str(checkpoint) in text and f"lakehouse repair {table}" in text, text
    for word in words:
        assert word in text, text


def repair(table: str, capsys) -> str:
    capsys.readouterr()
    assert lakehouse(["repair", table]) == 0
    return capsys.readouterr().out


def assert_invariants(settings: LakehouseSettings) -> None:
    report = check_all(LakehouseResource.from_settings(settings))
    assert report.ok, [str(v) for v in report.violations]


@pytest.mark.slow
def test_damaged_checkpoint_files_stop_the_run_and_repair_resumes_it(built, capsys):
    settings = built.settings
    built.land_recordings(files=1)  # a second batch in every checkpoint
    materialize(SEED_WITHOUT_CHECKS)
    bronze = Path(settings.checkpoint_path("bronze", "recordings"))
    silver = Path(settings.checkpoint_path("silver", "recordings_enriched"))
    gold = Path(settings.checkpoint_path("gold", "daily_patient_avg"))
    offsets = latest(bronze / "offsets")
    offsets.write_bytes(offsets.read_bytes()[:40])  # truncated
    latest(silver / "commits").write_bytes(b"v1\n{\"nextBatchWat\x00\xff")  # garbled
    (gold / "metadata").write_text("{not json")
    built.land_recordings(files=1)

    assert_stops_naming("bronze/recordings", bronze, "bronze.recordings", str(offsets), "damaged")
    assert_stops_naming(SILVER, silver, "silver.recordings_enriched", "commits", "damaged")
    assert_stops_naming("gold/daily_patient_avg", gold, "gold.daily_patient_avg", "metadata", "damaged")

    assert "Repaired" in repair("bronze.recordings", capsys)
    assert "Repaired" in repair("silver.recordings_enriched", capsys)
    # Gold is kept incrementally (its partial results in a table, not in the checkpoint's
    # state store), so its checkpoint is rebuilt from its commits as the others are.
    assert "Repaired" in repair("gold.daily_patient_avg", capsys)
    # Nothing deleted: each damaged checkpoint is kept beside the new one.
    assert any(p.name.startswith(".recordings.damaged-") for p in bronze.parent.iterdir())

    materialize(SEED_WITHOUT_CHECKS)
    assert_invariants(settings)


@pytest.mark.slow
def test_checkpoints_behind_or_ahead_of_their_tables_stop_the_run_and_repair_resumes_it(built, capsys, tmp_path):
    settings = built.settings
    silver = Path(settings.checkpoint_path("silver", "recordings_enriched"))
    old_silver = tmp_path / "old_silver_checkpoint"
    shutil.copytree(silver, old_silver)
    built.land_recordings(files=1)
    materialize(SEED_WITHOUT_CHECKS)
    # Behind: an older copy of silver's checkpoint put back.
    shutil.rmtree(silver)
    shutil.copytree(old_silver, silver)
    # Ahead: bronze rolled back by one commit (as a restore from an older backup would),
    # before anything downstream read that commit.
    built.land_recordings(files=1)
    materialize("bronze/recordings")
    log = Path(settings.table_path("bronze", "recordings")) / "_delta_log"
    drop_commit(max(log.glob("*.json")))
    built.land_recordings(files=1)

    assert_stops_naming(SILVER, silver, "silver.recordings_enriched", "is behind", "lost")
    bronze = Path(settings.checkpoint_path("bronze", "recordings"))
    assert_stops_naming("bronze/recordings", bronze, "bronze.recordings", "is ahead")

    assert "Repaired" in repair("silver.recordings_enriched", capsys)
    assert "Repaired" in repair("bronze.recordings", capsys)
    assert lakehouse(["repair", "bronze.recordings", "--check"]) == 0

    materialize(SEED_WITHOUT_CHECKS)
    assert_invariants(settings)


def test_spark_failing_on_a_damaged_file_is_reported_as_a_damaged_checkpoint(spark, store, tmp_path):
    # Without the IO manager's check in front, Spark itself meets the damaged file.
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text('{"a": 1}\n')
    table, checkpoint = str(tmp_path / "t"), str(tmp_path / "ck")
    build = lambda: spark.readStream.schema("a long").json(str(source))  # noqa: E731
    run_stream(build, DeltaSink(store, table, checkpoint), checkpoint_location=checkpoint)
    (Path(checkpoint) / "offsets" / "0").write_text("v1\n{\"batchWatermarkMs\":0")
    (source / "b.json").write_text('{"a": 2}\n')

    with pytest.raises(CorruptCheckpointError) as info:
        run_stream(build, DeltaSink(store, table, checkpoint), checkpoint_location=checkpoint)

    assert checkpoint in str(info.value) and "lakehouse repair" in str(info.value)


CHANGE_FLOW = ["bronze/patient_changes", "silver/patients_current", "gold/patient_changes"]
PATIENT_CHANGES = FreshnessPath("gold.patient_changes", ("silver.patients_current", "bronze.patient_changes"),
                                "patient_changes")


@pytest.mark.slow
def test_a_table_appended_by_deltas_own_sink_is_followed_and_repaired_from_the_event_log(store, built, capsys):
    settings = built.settings
    built.land_changes(files=1)  # the build's batch of gold.patient_changes, then this one
    materialize(CHANGE_FLOW)
    # gold.patient_changes appends each batch through Delta's own sink: its commits name the
    # query and batch and record no offsets; the event log holds them.
    gold = Path(settings.table_path("gold", "patient_changes"))
    batches = [e for e in store.history(str(gold)) if e.batch_id is not None]
    assert len(batches) == 2 and all(OFFSETS_KEY not in e.custom_metadata for e in batches)
    logged = logged_offsets(event_log_path(settings.root), "gold.patient_changes")
    assert {(e.query, e.batch_id) for e in batches} == set(logged)
    # What gold has read is known from them: fresh, then behind silver, then fresh again.
    assert data_lag(settings, store, PATIENT_CHANGES).pending == ()
    built.land_changes(files=1)
    materialize(CHANGE_FLOW[:2])
    assert len(data_lag(settings, store, PATIENT_CHANGES).pending) == 1

    checkpoint = Path(settings.checkpoint_path("gold", "patient_changes"))
    (checkpoint / "metadata").write_text("{not json")
    assert_stops_naming("gold/patient_changes", checkpoint, "gold.patient_changes", "metadata", "damaged")
    assert "Repaired" in repair("gold.patient_changes", capsys)
    materialize(["gold/patient_changes"])

    # Resumed after the last batch gold held: every change of the current table once.
    assert data_lag(settings, store, PATIENT_CHANGES).pending == ()
    log = delta_rows(settings, "gold", "patient_changes", ["patients_version", "change", "mrn", "name"])
    feed = pa.table(DeltaTable(str(settings.table_path("silver", "patients_current"))).load_cdf().read_all()).to_pylist()
    assert log == sorted((r["_commit_version"], r["_change_type"].removesuffix("_postimage"), r["mrn"], r["name"])
                         for r in feed if r["_change_type"] != "update_preimage")
