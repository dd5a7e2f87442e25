"""AUTO CDC tables as Dagster assets: changes land as JSON lines, a bronze table ingests them,
and an SCD type 1 and a type 2 table keep them, through the real IO manager, real Spark and
real tables; late changes, changes landed twice and deletes, checked against an independent
computation and another Delta reader."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from lakehouse_assets.assets.auto_cdc import auto_cdc_table
from lakehouse_assets.assets.bronze import bronze_table
from lakehouse_assets.assets.table_asset import AUTO_CDC, IO_MANAGER_KEY, STREAM_INPUT_KEY, stream_from
from lakehouse_assets.ingestion import AutoLoaderOptions
from lakehouse_assets.ingestion.columns import METADATA_COLUMNS
from lakehouse_assets.io import DeltaIOManager
from lakehouse_assets.spark import SparkResource
from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata

from . import reference

SOURCE = "ex_patient_changes"
CHANGES = ["bronze", SOURCE]
NOT_KEPT = ["op", "seq", *METADATA_COLUMNS]

changes = bronze_table(name=SOURCE, data_source=SOURCE, source_format="json",
                       options=AutoLoaderOptions(format="json", schema_hints="mrn BIGINT, seq BIGINT",
                                                 infer_column_types=True))


@auto_cdc_table(layer="silver", name="ex_patients_current", ins={"feed": stream_from(CHANGES)},
                keys=["mrn"], sequence_by="seq", apply_as_deletes="op = 'DELETE'", except_column_list=NOT_KEPT)
def patients_current(feed: DataFrame) -> DataFrame:
    """One row per live patient, its latest name and city."""
    return feed


@auto_cdc_table(layer="silver", name="ex_patients_history", ins={"feed": stream_from(CHANGES)},
                keys=["mrn"], sequence_by="seq", apply_as_deletes="op = 'DELETE'", except_column_list=NOT_KEPT,
                stored_as_scd_type=2)
def patients_history(feed: DataFrame) -> DataFrame:
    """Every version of every patient."""
    return feed


def _materialize() -> dg.ExecuteInProcessResult:
    spark = SparkResource()
    return dg.materialize(
        [changes, patients_current, patients_history],
        resources={"spark": spark, IO_MANAGER_KEY: DeltaIOManager(spark=spark),
                   STREAM_INPUT_KEY: DeltaIOManager(spark=spark, read_inputs_as="stream")},
        instance=dg.DagsterInstance.ephemeral(),
    )


def _land(settings: Any, name: str, rows: Sequence[dict[str, Any]]) -> None:
    folder = settings.landing_path(SOURCE)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows))


def _change(mrn: int, seq: int, name: str | None = "Ada", city: str | None = "Oslo", op: str = "UPSERT") -> dict[str, Any]:
    return {"mrn": mrn, "name": name, "city": city, "op": op, "seq": seq}


def test_changes_land_and_both_tables_keep_them(spark, settings) -> None:
    first = [_change(1, 1), _change(2, 1, "Bo"), _change(1, 4, "Ada L."), _change(3, 2, "Cy", "Rome"),
             _change(3, 6, None, None, "DELETE")]
    second = [_change(1, 2, "Ada K."),  # late: between 1 and 4
              _change(3, 5, "Cy", "Oslo"),  # late: before the delete, which stays
              _change(2, 3, "Bo", "Rome"), _change(4, 9, "Di")]
    _land(settings, "a.json", first[:3])
    _land(settings, "b.json", first[3:])
    metadata = materialization_metadata(_materialize())
    assert metadata["silver/ex_patients_current"]["micro_batches"] == 1

    _land(settings, "c.json", second)
    _land(settings, "c_again.json", second)  # the same changes landed twice under another name
    _materialize()

    seen = first + second
    current = delta_rows(settings, "silver", "ex_patients_current", ["mrn", "name", "city"])
    assert current == sorted(tuple(r.values()) for r in reference.scd1(seen))
    history = delta_rows(settings, "silver", "ex_patients_history", ["mrn", "name", "city", "__START_AT", "__END_AT"])
    assert history == sorted(tuple(r.values()) for r in reference.scd2(seen))
    assert ("Cy", 6) in {(name, end) for _, name, _, _, end in history}, "the delete closed Cy's last version"


def test_the_definition_says_how_changes_apply() -> None:
    spec = patients_history.metadata_by_key[patients_history.key]
    assert spec[AUTO_CDC]["stored_as_scd_type"] == 2 and spec[AUTO_CDC]["keys"] == ["mrn"]
    assert "SCD type 2 by mrn, ordered by seq" in spec["auto_cdc"]
