"""A table's TableSpec is built once by its declaration and read back typed, after the trip
through Dagster's own metadata serialization (definitions to the UI and the run workers)."""

from __future__ import annotations

import dagster as dg
import pytest
from dagster._core.definitions.metadata import normalize_metadata
from dagster._serdes import deserialize_value, serialize_value

from lakehouse_assets.assets.gold import daily_patient_avg
from lakehouse_assets.assets.silver import recordings_enriched
from lakehouse_assets.assets.table_asset import stream_from, table_asset
from lakehouse_assets.cdc import AutoCdc
from lakehouse_assets.errors import LakehouseError
from lakehouse_assets.quality.rules import Severity, sql_rule
from lakehouse_assets.spec import ColumnSource, DeclaredExpectation, TableSpec
from lakehouse_assets.storage import StreamOptions, TableLayout
from lakehouse_assets.streaming import TriggerKind

EVERYTHING = TableSpec(
    layer="silver", name="everything", output_mode="update", write_mode="merge", keys=("id", "__START_AT"),
    merge_schema=True, trigger=TriggerKind.processingTime, timeout_seconds=30.0,
    layout=TableLayout({"delta.enableChangeDataFeed": "true"}, ("day",), ()),
    column_types={"id": "BIGINT", "amount": "DECIMAL(10,2)"}, column_descriptions={"id": "The key"},
    column_lineage={"amount": (ColumnSource("bronze.raw", "amount"), ColumnSource("bronze.fx", "rate"))},
    expectations=(DeclaredExpectation("id_present", "drop row", "EXPECT (id IS NOT NULL)", ("id",)),),
    quarantine="silver.everything_quarantine", streams_from=("bronze.raw",),
    stream_options={"bronze.raw": StreamOptions(max_files_per_trigger=2, read_change_feed=True)},
    auto_cdc=AutoCdc(keys=["id"], sequence_by="seq", stored_as_scd_type=2, apply_as_deletes="op = 'D'",
                     track_history_column_list=["amount"]),
    recomputed_by="SELECT id, count(*) AS n FROM bronze.raw GROUP BY id", pipeline="shop",
)


def test_a_spec_survives_dagsters_metadata_serialization_whole() -> None:
    normalized = normalize_metadata(EVERYTHING.as_metadata())
    shipped = deserialize_value(serialize_value(normalized))

    assert TableSpec.of(shipped) == EVERYTHING
    assert TableSpec.of(EVERYTHING.as_metadata()) == EVERYTHING
    assert TableSpec.of({"dagster/column_schema": None}) is None


def test_each_way_of_declaring_a_table_carries_its_spec_in_one_entry() -> None:
    enriched = TableSpec.of(recordings_enriched.metadata_by_key[dg.AssetKey(["silver", "recordings_enriched"])])
    assert enriched is not None
    assert (enriched.quarantine, enriched.streams_from) == ("silver.recordings_quarantine", ("bronze.recordings",))
    assert any(e.drops_rows for e in enriched.expectations)

    gold = TableSpec.of(daily_patient_avg.metadata_by_key[dg.AssetKey(["gold", "daily_patient_avg"])])  # SQL
    assert gold is not None and gold.recomputed_by and gold.output_mode == "update"
    assert gold.keys == ("mrn", "name", "date")
    lakehouse_entries = [k for k in daily_patient_avg.metadata_by_key[daily_patient_avg.key]
                         if k.startswith("lakehouse/") and k not in ("lakehouse/sql", "lakehouse/sql_file")]
    assert lakehouse_entries == ["lakehouse/table_spec"]


def test_a_dropping_expectation_needs_a_quarantine_named_at_declaration() -> None:
    with pytest.raises(LakehouseError, match=r"silver\.t: expectations \['positive'\] drop failing rows"):
        @table_asset(layer="silver", name="t", ins={"raw": stream_from(["bronze", "raw"])},
                     expectations=[sql_rule("positive", "x > 0", columns=["x"], severity=Severity.ERROR)])
        def t(raw):  # type: ignore[no-untyped-def]
            return raw
