"""Bad input, file by file (issue 8): odd times, files that are empty, unreadable, deleted,
re-landed or oddly named, and a landing folder that disappears.

Each drives the bronze ingestion on the product's path (the IO manager's ingestion handler,
the shared session, real Delta tables) and checks that every good file's records are in bronze exactly once, that a
file not read is named with what to do, and that the next run works.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.ingestion import AutoLoaderOptions, LandingFolderMissingError
from lakehouse_assets.location import spark_file_uri
from lakehouse_assets.quality.rules import Severity, not_null
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage import DeltaTableStore
from lakehouse_assets_tests.ingestion.helpers import RUN_LOG, Bronze, file_uri, json_lines, recording

WARNINGS = RUN_LOG


@pytest.fixture
def bronze(spark: SparkSession, settings: LakehouseSettings, store: DeltaTableStore) -> Bronze:
    return Bronze(spark, settings, store)


def rows_per_file(bronze: Bronze) -> Counter[str]:
    """How many bronze rows each landed file gave."""
    return Counter(r["_source_file"] for r in bronze.rows())


def land_good(bronze: Bronze, name: str, first: int, count: int = 3) -> Path:
    return bronze.land(name, json_lines([recording(first + i) for i in range(count)]))


def warnings_naming(caplog: pytest.LogCaptureFixture, path: Path) -> list[str]:
    """The ingestion's warnings that name ``path`` (as Spark spells it)."""
    return [r.getMessage() for r in caplog.records if r.name == WARNINGS and spark_file_uri(str(path)) in r.getMessage()]


def test_future_and_ancient_modification_times_do_not_hide_files(bronze: Bronze) -> None:
    """Spark's file source skips files older than the newest time seen minus maxFileAge: a
    file dated in 2200 would hide every normal file after it, and one dated 1912 is never read."""
    land_good(bronze, "now.json", 0)
    bronze.run()
    future = land_good(bronze, "future.json", 10)
    os.utime(future, (7_258_118_400, 7_258_118_400))  # 2200-01-01
    bronze.run()
    later = land_good(bronze, "after-the-future.json", 20)
    ancient = land_good(bronze, "ancient.json", 30)
    os.utime(ancient, (-1_830_297_600, -1_830_297_600))  # 1912-01-01

    assert bronze.run().rows_written == 6

    assert rows_per_file(bronze) == {file_uri(p): 3 for p in (bronze.landing / "now.json", future, later, ancient)}


def unreadable_file(folder: Path, name: str) -> Path:
    """A landed file nobody can open, root included: mode 000 for other users; for root (whom
    modes do not stop) a link to a kernel attribute that refuses reads. Skips when neither."""
    path = folder / name
    if os.geteuid() != 0:
        path.write_text(json_lines([recording(99)]))
        path.chmod(0)
        return path
    for target in sorted(glob.glob("/sys/bus/*/rescan")) + sorted(glob.glob("/sys/devices/*/*/rescan")):
        try:
            with open(target, "rb") as handle:
                handle.read(1)
        except OSError:
            path.symlink_to(target)
            return path
    pytest.skip("running as root and no unreadable kernel attribute to link to: no file root cannot read")


def test_files_that_cannot_be_read_yet_are_held_back_named_and_read_once_fixed(
    bronze: Bronze, caplog: pytest.LogCaptureFixture
) -> None:
    """Empty, zero-byte-then-growing, unopenable, and Spark-unreadable names (':' fails Hadoop,
    '?*[]{}\\' make Spark read the batch's other files twice): none stops or duplicates the
    good files, each is named with what to do, and each is read once fixed."""
    caplog.set_level(logging.WARNING, logger=WARNINGS)
    land_good(bronze, "first.json", 0)
    bronze.run()  # the schema comes from a good file; the checkpoint exists from here on
    good = land_good(bronze, "good.json", 10)
    empty = bronze.land("empty.json", b"")
    bronze.land("growing.json", b"")
    locked = unreadable_file(bronze.landing, "locked.json")
    odd_names = {name: land_good(bronze, name, 100 + 10 * i) for i, name in enumerate(["a:b.json", "q?.json", "star*.json", "[x]{y}.json", "back\\slash.json"])}

    assert bronze.run().rows_written == 3

    assert rows_per_file(bronze) == {file_uri(bronze.landing / "first.json"): 3, file_uri(good): 3}
    assert "empty (0 bytes)" in " ".join(warnings_naming(caplog, empty))
    assert "cannot be opened" in " ".join(warnings_naming(caplog, locked))
    for path in odd_names.values():
        assert "Rename it" in " ".join(warnings_naming(caplog, path)), path.name

    # The writer finishes, permissions are fixed, the odd names are renamed.
    land_good(bronze, "growing.json", 200)
    locked.unlink()
    land_good(bronze, "locked.json", 300)
    for i, path in enumerate(odd_names.values()):
        path.rename(path.with_name(f"renamed-{i}.json"))

    assert bronze.run().rows_written == 3 + 3 + 3 * len(odd_names)
    per_file = rows_per_file(bronze)
    assert set(per_file.values()) == {3} and len(per_file) == 4 + len(odd_names)
    assert file_uri(empty) not in per_file  # still empty: nothing to read, nothing lost
    assert bronze.run().rows_written == 0


class DeletingStore(DeltaTableStore):
    """The real store; when the first micro-batch commits, a landed file the next batch was
    already given is deleted, as a clean-up job racing the ingestion would."""

    def __init__(self, victim: Path) -> None:
        super().__init__()
        self.victim = victim

    def write(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201 - the store's own signature
        result = super().write(*args, **kwargs)
        self.victim.unlink(missing_ok=True)
        return result


def test_a_file_deleted_between_listing_and_reading_is_skipped_by_name_and_the_next_run_works(
    bronze: Bronze, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark fails the batch with FileNotFoundException and then fails every replay of it;
    the ingestion skips the file, names it, and goes on."""
    caplog.set_level(logging.WARNING, logger=WARNINGS)
    first = land_good(bronze, "1.json", 0)
    doomed = land_good(bronze, "2.json", 10)
    os.utime(doomed, (time.time() + 5, time.time() + 5))  # listed after 1.json: in the second batch
    bronze.store = DeletingStore(doomed)

    # A counted expectation routes the batches through the store's write, where the file is
    # deleted: Delta's own sink, which bronze uses without one, runs no Python between batches.
    counted = not_null("device_id", name="device_id_present", severity=Severity.WARN)
    assert bronze.run(AutoLoaderOptions(max_files_per_trigger=1), expectations=[counted]).batches == 1

    assert rows_per_file(bronze) == {file_uri(first): 3}
    assert any("deleted" in m and "land it again under a new name" in m for m in warnings_naming(caplog, doomed))
    again = land_good(bronze, "2-again.json", 10)
    assert bronze.run().rows_written == 3
    assert rows_per_file(bronze) == {file_uri(first): 3, file_uri(again): 3}


def test_a_relanded_file_is_never_duplicated_and_new_content_is_named_not_silently_dropped(
    bronze: Bronze, caplog: pytest.LogCaptureFixture
) -> None:
    """A path is ingested once (Auto Loader's default, allowOverwrites=false). Same content
    again: nothing duplicated. New content under the same name: not read, and the run says so,
    with what to do (land it under a new name), which then works."""
    caplog.set_level(logging.WARNING, logger=WARNINGS)
    same = land_good(bronze, "same.json", 0)
    changed = land_good(bronze, "changed.json", 10)
    bronze.run()
    time.sleep(0.01)  # a new modification time, as any rewrite has
    land_good(bronze, "same.json", 0)
    land_good(bronze, "changed.json", 50, count=5)

    assert bronze.run().rows_written == 0

    assert rows_per_file(bronze) == {file_uri(same): 3, file_uri(changed): 3}
    told = " ".join(warnings_naming(caplog, changed))
    assert "written again" in told and "under a new name" in told
    changed.rename(changed.with_name("changed-v2.json"))
    assert bronze.run().rows_written == 5
    assert rows_per_file(bronze)[file_uri(changed.with_name("changed-v2.json"))] == 5


def test_a_landing_folder_that_disappears_stops_the_run_naming_it_and_nothing_is_lost(bronze: Bronze) -> None:
    """Spark says PATH_NOT_FOUND with a stack trace; the ingestion names the folder and the
    fix, and once the folder is back the run goes on where it stopped."""
    first = land_good(bronze, "1.json", 0)
    bronze.run()
    moved = bronze.landing.with_name("recordings-moved")
    bronze.landing.rename(moved)

    with pytest.raises(LandingFolderMissingError) as stopped:
        bronze.run()

    assert str(bronze.landing) in str(stopped.value) and "mkdir -p" in str(stopped.value)
    moved.rename(bronze.landing)
    second = land_good(bronze, "2.json", 10)
    assert bronze.run().rows_written == 3
    assert rows_per_file(bronze) == {file_uri(first): 3, file_uri(second): 3}


HOSTILE_NAMES = [
    "..json",  # hidden: never data
    "a..b.json",
    "..%2F..%2Fescape.json",
    "%2e%2e%2f%2e%2e%2fescape.json",
    "new\nline.json",
    "tab\tand space.json",
    "é ü 雪.json",
    "x" * 240 + ".json",  # with the writer's ".<name>.tmp", the longest a name can be
]


def test_landed_file_names_cannot_steer_writes_outside_the_lakehouse_root(bronze: Bronze, tmp_path: Path) -> None:
    """Names are data, never paths: each file is ingested once under its own name, and
    everything the run writes stays under the lakehouse root."""
    outside_before = {p for p in tmp_path.rglob("*") if not p.is_relative_to(bronze_root(bronze))}
    landed = {name: land_good(bronze, name, 10 * i) for i, name in enumerate(HOSTILE_NAMES)}

    bronze.run()

    expected = {spark_file_uri(str(path)): 3 for name, path in landed.items() if not name.startswith(".")}
    assert rows_per_file(bronze) == expected
    outside_after = {p for p in tmp_path.rglob("*") if not p.is_relative_to(bronze_root(bronze))}
    assert outside_after == outside_before
    # What the hostile names would reach if they were taken as paths.
    assert not list(tmp_path.parent.glob("escape.json")) and not list(bronze_root(bronze).parent.glob("escape.json"))


def bronze_root(bronze: Bronze) -> Path:
    return Path(bronze.landing).parents[1]


def test_removing_the_landing_folder_between_runs_does_not_touch_the_table(bronze: Bronze) -> None:
    """The clean way out of a missing-folder error: recreate it empty; nothing is re-read."""
    land_good(bronze, "1.json", 0)
    bronze.run()
    shutil.rmtree(bronze.landing)
    bronze.landing.mkdir()
    assert bronze.run().rows_written == 0 and bronze.count() == 3
