"""Bad content landed beside good files, through the whole graph (issue 8): malformed JSON,
binary garbage named .json, non-UTF-8 bytes, an empty file and a 10 MB line end as
quarantined rows with reasons; the good files' records are in bronze exactly once, and
bronze = silver + quarantine."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from lakehouse_assets_tests.assets.pipeline import TO_SILVER, delta_rows, materialize
from lakehouse_assets_tests.ingestion.helpers import land as land_file

BAD_FILES: dict[str, bytes] = {
    "malformed.json": b'{"device_id": 1, "mrn": \n{"device_id": 2, "mrn": 3, "time": }\nnot json at all\n',
    "garbage.json": bytes(range(256)) * 8 + b"\x00\xff\xfe\n\x89PNG\r\n\x1a\n",
    "latin1.json": '{"device_id": 1, "mrn": 1, "time": 1577836800, "heartrate": "70 café"}\n'.encode("latin-1")
    + b"\xc3\x28 \xa0\xa1 \xf0\x28\x8c\x28\n",
    "empty.json": b"",
    # A writer that died mid-record: one 10 MB line, no closing brace.
    "ten-megabytes.json": b'{"device_id": 1, "mrn": 1, "time": 1577836800, "heartrate": "' + b"9" * 10_000_000 + b"\n",
}


@pytest.mark.slow
def test_bad_content_is_quarantined_with_reasons_and_good_files_arrive_exactly_once(built):
    settings, landing = built.settings, built.landing
    silver_before = len(delta_rows(settings, "silver", "recordings_enriched", ["mrn"]))
    # A good file and the bad ones land together: one batch reads them all.
    good = built.land_recordings(files=1, bad_rate=0.0)
    for name, content in BAD_FILES.items():
        land_file(landing / "recordings", name, content)

    materialize(TO_SILVER)

    bronze = Counter(f for (f,) in delta_rows(settings, "bronze", "recordings", ["_source_file"]))
    for landed in (*built.recordings.files, *good.files):
        lines = landed.path.read_bytes().count(b"\n")
        assert bronze["file:" + str(landed.path)] == lines, landed.path.name
    silver = delta_rows(settings, "silver", "recordings_enriched", ["mrn"])
    quarantine = delta_rows(settings, "silver", "recordings_quarantine", ["_source_file", "_quarantine_reason", "_rescued_data"])
    assert sum(bronze.values()) == len(silver) + len(quarantine)
    assert len(silver) == silver_before + good.counts.total
    quarantine = [row for row in quarantine if row[0].rsplit("/", 1)[-1] in BAD_FILES]

    by_file = Counter(source.rsplit("/", 1)[-1] for source, _, _ in quarantine)
    assert by_file["malformed.json"] == 3
    assert by_file["garbage.json"] >= 1 and by_file["latin1.json"] == 2 and by_file["ten-megabytes.json"] == 1
    assert "empty.json" not in by_file  # no records, and held back until it has some
    assert all("rescued_data_empty" in reason.split(",") for _, reason, _ in quarantine)
    huge = next(json.loads(rescued) for source, _, rescued in quarantine if source.endswith("ten-megabytes.json"))
    assert len(huge["_raw"]) > 10_000_000
