"""Damaged checkpoints, and checkpoints behind or ahead of their tables: the run stops with an
error naming the checkpoint and the recovery, and `lakehouse repair` gets the pipeline going
again without a full refresh, with every landed record in bronze once and nothing lost."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lakehouse_assets.cli import main as lakehouse
from lakehouse_assets.errors import CorruptCheckpointError
from lakehouse_assets.reliability.invariants import check_all
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.simulator import land
from lakehouse_assets.storage import DeltaSink
from lakehouse_assets.storage._files import locate
from lakehouse_assets.storage.checkpoint import batch_ids
from lakehouse_assets.streaming import run_stream
from lakehouse_assets_tests.assets.pipeline import SEED_PIPELINE, materialize
from lakehouse_assets_tests.storage.helpers import drop_commit

LANDING_OPTIONS = dict(records_per_file=150, bad_rate=0.05, seed=31, files_per_year=365)
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
    report = check_all(settings)
    assert report.ok, [str(v) for v in report.violations]


@pytest.mark.slow
def test_damaged_checkpoint_files_stop_the_run_and_repair_resumes_it(spark, settings, capsys):
    landing = settings.root / "landing"
    land(landing, files=2, **LANDING_OPTIONS)
    materialize(SEED_PIPELINE)
    land(landing, files=1, **LANDING_OPTIONS)
    materialize(SEED_PIPELINE)
    bronze = settings.checkpoint_path("bronze", "recordings")
    silver = settings.checkpoint_path("silver", "recordings_enriched")
    gold = settings.checkpoint_path("gold", "daily_patient_avg")
    offsets = latest(bronze / "offsets")
    offsets.write_bytes(offsets.read_bytes()[:40])  # truncated
    latest(silver / "commits").write_bytes(b"v1\n{\"nextBatchWat\x00\xff")  # garbled
    (gold / "metadata").write_text("{not json")
    land(landing, files=1, **LANDING_OPTIONS)

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

    materialize(SEED_PIPELINE)
    assert_invariants(settings)


@pytest.mark.slow
def test_checkpoints_behind_or_ahead_of_their_tables_stop_the_run_and_repair_resumes_it(spark, settings, capsys, tmp_path):
    landing = settings.root / "landing"
    land(landing, files=2, **LANDING_OPTIONS)
    materialize(SEED_PIPELINE)
    silver = settings.checkpoint_path("silver", "recordings_enriched")
    old_silver = tmp_path / "old_silver_checkpoint"
    shutil.copytree(silver, old_silver)
    land(landing, files=1, **LANDING_OPTIONS)
    materialize(SEED_PIPELINE)
    # Behind: an older copy of silver's checkpoint put back.
    shutil.rmtree(silver)
    shutil.copytree(old_silver, silver)
    # Ahead: bronze rolled back by one commit (as a restore from an older backup would),
    # before anything downstream read that commit.
    land(landing, files=1, **LANDING_OPTIONS)
    materialize("bronze/recordings")
    log = settings.table_path("bronze", "recordings") / "_delta_log"
    drop_commit(max(log.glob("*.json")))
    land(landing, files=1, **LANDING_OPTIONS)

    assert_stops_naming(SILVER, silver, "silver.recordings_enriched", "is behind", "lost")
    bronze = settings.checkpoint_path("bronze", "recordings")
    assert_stops_naming("bronze/recordings", bronze, "bronze.recordings", "is ahead")

    assert "Repaired" in repair("silver.recordings_enriched", capsys)
    assert "Repaired" in repair("bronze.recordings", capsys)
    assert lakehouse(["repair", "bronze.recordings", "--check"]) == 0

    materialize(SEED_PIPELINE)
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
