"""Damaged checkpoints: the run stops with an error naming the checkpoint and the way out,
`lakehouse reset TABLE`; after it the next run rebuilds the table from the landed files
(kept where they landed), with the same rows, every landed record in bronze once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lakehouse_assets.cli import main as lakehouse
from lakehouse_assets.errors import CorruptCheckpointError
from lakehouse_assets.location import locate
from lakehouse_assets.reliability.flows import project_flows
from lakehouse_assets.reliability.landed_once import check_landed_once
from lakehouse_assets.reliability.table_reader import read_rows, row_tuples
from lakehouse_assets.storage import DeltaSink
from lakehouse_assets.streaming import run_stream
from lakehouse_assets_tests.assets.pipeline import SEED_WITHOUT_CHECKS, materialize

SILVER = ["silver/recordings_enriched", "silver/recordings_quarantine"]
#: Filled from the clock of the run that wrote the row, not from what landed.
RUN_TIME_COLUMNS = frozenset({"_ingested_at"})


def failure_text(exc: BaseException) -> str:
    """The messages of an error and of every error it came from."""
    texts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(texts)


def latest(folder: Path) -> Path:
    return folder / str(max(int(p.name) for p in folder.iterdir() if p.name.isdigit()))


def assert_stops_naming(selection, checkpoint: Path, table: str, *words: str) -> None:
    with pytest.raises(Exception) as info:
        materialize(selection)
    text = failure_text(info.value)
    assert str(checkpoint) in text and f"lakehouse reset {table}" in text, text
    assert "lakehouse repair" not in text, text  # no such command
    for word in words:
        assert word in text, text


def rows_of(table: Path) -> Counter:
    rows = read_rows(locate(table))
    return Counter(row_tuples(rows, sorted(c for c in rows.column_names if c not in RUN_TIME_COLUMNS)))


@pytest.mark.slow
def test_a_damaged_checkpoint_stops_the_run_and_a_reset_rebuilds_the_table_from_its_landed_files(built, capsys):
    settings = built.settings
    built.land_recordings(files=1)  # a second batch in every checkpoint
    materialize(SEED_WITHOUT_CHECKS)
    bronze = Path(settings.checkpoint_path("bronze", "recordings"))
    silver = Path(settings.checkpoint_path("silver", "recordings_enriched"))
    offsets = latest(bronze / "offsets")
    offsets.write_bytes(offsets.read_bytes()[:40])  # truncated
    latest(silver / "commits").write_bytes(b"v1\n{\"nextBatchWat\x00\xff")  # garbled
    new = built.land_recordings(files=1)
    bronze_table = Path(settings.table_path("bronze", "recordings"))
    before = rows_of(bronze_table)

    assert_stops_naming("bronze/recordings", bronze, "bronze.recordings", "damaged")
    assert_stops_naming(SILVER, silver, "silver.recordings_enriched", "damaged")
    assert rows_of(bronze_table) == before  # the failed run committed nothing

    capsys.readouterr()
    assert lakehouse(["reset", "bronze.recordings", "--yes"]) == 0
    assert "Reset bronze.recordings" in capsys.readouterr().out
    assert not bronze.exists() and not bronze_table.exists()
    materialize("bronze/recordings")

    # Rebuilt from the landed files, kept where they landed: the rows it held, then the new file's.
    after = rows_of(bronze_table)
    rows = read_rows(locate(bronze_table))
    sources = Counter(Path(s.removeprefix("file:")).name for s in rows.column("_source_file").to_pylist())
    assert sources[new.paths[0].name] > 0
    assert sum(sources.values()) - sources[new.paths[0].name] == sum(before.values())
    assert before <= after and sum((after - before).values()) == sources[new.paths[0].name]
    landed_once = check_landed_once(settings, project_flows(settings))
    assert landed_once.ok and "bronze.recordings" in landed_once.checked, [str(v) for v in landed_once.violations]
    # And again, from nothing new: the rebuilt checkpoint resumes (nothing read twice).
    materialize("bronze/recordings")
    assert rows_of(bronze_table) == after


def test_spark_failing_on_a_damaged_file_is_reported_as_a_damaged_checkpoint(spark, store, tmp_path):
    # Without the IO manager in front, Spark itself meets the damaged file.
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text('{"a": 1}\n')
    table, checkpoint = str(tmp_path / "t"), str(tmp_path / "_checkpoints" / "bronze" / "t")
    build = lambda: spark.readStream.schema("a long").json(str(source))  # noqa: E731
    run_stream(build, DeltaSink(store, table), checkpoint_location=checkpoint)
    (Path(checkpoint) / "offsets" / "0").write_text("v1\n{\"batchWatermarkMs\":0")
    (source / "b.json").write_text('{"a": 2}\n')

    with pytest.raises(CorruptCheckpointError) as info:
        run_stream(build, DeltaSink(store, table), checkpoint_location=checkpoint)

    text = str(info.value)
    assert checkpoint in text and "lakehouse reset bronze.t" in text and "lakehouse repair" not in text
