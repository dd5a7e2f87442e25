"""The lakehouse's own files behave alike on a local disk and on a real S3-API server (s3proxy
on loopback): listing a landing folder, the landing sensor's scan, stored schemas, the event
log (the tables' commits, read by delta-rs), writes readers never see half of."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.ingestion.files import list_data_files
from lakehouse_assets.ingestion.schema_store import SchemaStore
from lakehouse_assets.location import Location, ObjectStore, locate
from lakehouse_assets.sensors.landing import LandingCursor, scan_landing
from lakehouse_assets.storage import AppTransaction, DeltaTableStore
from lakehouse_assets.storage.batch_record import EXPECTATIONS_KEY, RUN_KEY
from lakehouse_assets.tables.event_log import events
from lakehouse_assets_tests.storage.conftest import Folder


def put(location: Location, text: str) -> None:
    location.write_text(text)


def test_a_folder_lists_its_files_at_any_depth_and_reads_back_what_was_written(folder: Folder) -> None:
    landing = locate(folder("landing/recordings"))
    assert not landing.exists() and landing.files() == [] and landing.names() == []
    put(landing / "0001.json", '{"id": 1}\n')
    put(landing / "2026" / "11" / "0002.json", '{"id": 2}\n{"id": 3}\n')
    assert landing.is_dir() and not (landing / "0001.json").is_dir()
    listed = {f.relative_path: f.size for f in landing.files()}
    assert listed == {"0001.json": 10, "2026/11/0002.json": 20}
    assert {f.relative_path for f in landing.files(recursive=False)} == {"0001.json"}
    assert landing.names() == ["0001.json", "2026"]
    assert (landing / "2026" / "11" / "0002.json").read_text() == '{"id": 2}\n{"id": 3}\n'
    one = (landing / "0001.json").file()
    assert one is not None and (one.relative_path, one.size) == ("0001.json", 10)
    assert (landing / "missing.json").file() is None and (landing / "2026").file() is None
    assert all(abs(f.modified.timestamp() - time.time()) < 120 for f in landing.files())
    # Spark's name for a landed file: what bronze's _source_file holds.
    uri = landing.uri_of("0001.json")
    assert uri.startswith("file:/") if landing.is_local else uri == f"{folder('landing/recordings')}/0001.json"


def test_a_file_is_created_once_and_replaced_whole(folder: Folder) -> None:
    file = locate(folder("_schemas/bronze/recordings/_schemas/0"))
    first = file.create_text("first")
    assert first is not None and first == file.version()
    assert file.create_text("second") is None and file.read_text() == "first"
    file.write_text("replaced")
    assert file.read_text() == "replaced" and file.version() != first
    # Nothing written beside it is left over.
    assert locate(folder("_schemas/bronze/recordings/_schemas")).names() == ["0"]


def test_a_file_on_the_store_is_replaced_only_by_a_writer_that_read_its_present_version(
        store_folder: Folder) -> None:
    file = locate(store_folder("_locks/bronze.recordings.lock"))
    first = file.create_text("first")
    assert first is not None
    second = file.replace_text("second", version=first)
    assert second is not None and second != first and file.read_text() == "second"
    # A writer still holding the first version finds it changed and writes nothing.
    assert file.replace_text("stale", version=first) is None and file.read_text() == "second"
    file.remove()
    assert file.replace_text("gone", version=second) is None and not file.exists()


def test_the_landing_scan_announces_each_settled_file_once(folder: Folder) -> None:
    landing = locate(folder("landing/recordings"))
    put(landing / "a.json", "1\n")
    put(landing / "day=1" / "b.json", "2\n")
    put(landing / "c.json.tmp", "partial")  # still being written under a temporary name
    put(landing / "_hidden" / "d.json", "4\n")
    later = time.time() + 60  # every file settled
    first = scan_landing(landing, LandingCursor({}, {}), now=later)
    assert first.ready == ["a.json", "day=1/b.json"]
    assert scan_landing(landing, first.cursor, now=later).ready == []
    put(landing / "a.json", "1\n1\n")  # re-landed with new content
    put(landing / "e.json", "5\n")
    assert scan_landing(landing, first.cursor, now=later).ready == ["a.json", "e.json"]
    # Just landed: waits one look for its size to hold.
    young = scan_landing(landing, first.cursor, now=time.time() - 60)
    assert young.ready == [] and young.waiting == ["a.json", "e.json"]


def test_ingestion_lists_the_data_files_it_reads_by_the_name_spark_gives_them(folder: Folder) -> None:
    root = folder("landing/patients")
    put(locate(root) / "p1.csv", "mrn\n1\n")
    put(locate(root) / "x" / "p2.csv", "mrn\n2\n")
    put(locate(root) / ".p3.csv", "mrn\n3\n")
    assert [f.relative_path for f in list_data_files(root)] == ["p1.csv"]
    listed = list_data_files(root, recursive=True)
    assert sorted(f.relative_path for f in listed) == ["p1.csv", "x/p2.csv"]
    if root.is_local:
        return
    assert sorted(f.path for f in listed) == [f"{root}/p1.csv", f"{root}/x/p2.csv"]


def test_a_stored_schema_keeps_its_versions(folder: Folder) -> None:
    store = SchemaStore(folder("_schemas/bronze/recordings"))
    assert store.versions() == [] and store.latest() is None
    one = T.StructType([T.StructField("id", T.LongType())])
    two = T.StructType([*one.fields, T.StructField("name", T.StringType())])
    store.add(one, inferred_with={"format": "json"}, schema_hints=None, reason="first inference")
    store.add(two, inferred_with={"format": "json"}, schema_hints=None, reason="new column name",
              files=["file:/landing/2.json"])
    again = SchemaStore(folder("_schemas/bronze/recordings"))
    latest = again.latest()
    assert again.versions() == [0, 1] and latest is not None
    assert (latest.version, latest.schema, latest.reason, latest.files) == (1, two, "new column name",
                                                                            ("file:/landing/2.json",))
    assert again.read(0).schema == one


def test_a_location_is_named_as_spark_names_it_and_local_only_work_is_refused_by_purpose(tmp_path: Path) -> None:
    local = locate(f"file://{tmp_path}/lake")
    assert (str(local), local.is_local, local.local("a test")) == (f"{tmp_path}/lake", True, tmp_path / "lake")
    assert str(local / "bronze" / "recordings") == f"{tmp_path}/lake/bronze/recordings"
    stored = locate("s3://bucket/lake/", ObjectStore())  # AWS's name for it; Spark's S3A reads s3a://
    assert (str(stored), stored.path, stored.is_local) == ("s3a://bucket/lake", "bucket/lake", False)
    assert (stored / "bronze").name == "bronze" and (stored / "bronze").parent == stored
    with pytest.raises(ConfigurationError, match=r"^Locking a table needs the lakehouse on a local disk, and "
                                                 r"s3a://bucket/lake is on object storage"):
        stored.local("Locking a table")
    with pytest.raises(ConfigurationError, match=r"gs://bucket/lake: the lakehouse reads local paths and S3-API"):
        locate("gs://bucket/lake")
    with pytest.raises(ConfigurationError, match="name the bucket"):
        locate("s3a:///lake")
    # Where the store is, only the lakehouse resource knows: a URI on one without it is refused.
    with pytest.raises(ConfigurationError, match=r"^s3a://bucket/x is on object storage: give the lakehouse "
                                                 r"resource's store with it, or a Location under the lakehouse's root$"):
        locate("s3a://bucket/x")
    on_server = locate("s3a://bucket/lake", ObjectStore("http://127.0.0.1:9000", "us-east-1"))
    assert locate(on_server / "bronze").store == on_server.store  # a location keeps its store


def test_the_event_log_shows_each_batch_once_read_back_from_the_commits_where_they_lie(
        folder: Folder, spark: SparkSession, request: pytest.FixtureRequest) -> None:
    root = locate(folder("lake"))
    if not root.is_local:
        request.getfixturevalue("spark_on_s3")  # the shared session reaches the server
    store = DeltaTableStore(root.store)
    table = str(root / "bronze" / "recordings")
    counted = json.dumps({"rows": 10, "failed": {"mrn_positive": 1}})
    for batch in (0, 1):
        written = store.write(spark.range(0, 9), table, transaction=AppTransaction("q", batch),
                              metadata={RUN_KEY: "run-1", EXPECTATIONS_KEY: counted})
        assert not written.skipped
    # The same batch again (a retried run): the commit's app transaction keeps it out.
    assert store.write(spark.range(0, 9), table, transaction=AppTransaction("q", 1),
                       metadata={RUN_KEY: "run-2", EXPECTATIONS_KEY: counted}).skipped

    logged = events(root, table="bronze.recordings")
    assert [(e.table, e.version, e.run_id, e.query_id, e.batch_id, e.rows_written, e.rows_checked,
             e.expectations_failed) for e in logged] == [
        ("bronze.recordings", batch, "run-1", "q", batch, 9, 10, {"mrn_positive": 1}) for batch in (0, 1)]
    # The whole lakehouse's log finds the table under the root; a run's commits are its own.
    assert [e.version for e in events(root)] == [0, 1]
    assert events(root, run_id="run-2") == []
    assert store.committed_batch(table, "q") == 1
