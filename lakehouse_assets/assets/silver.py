"""Silver: validated, enriched recordings, the patients lookup, and the patient record
changes kept as a current table (SCD type 1) and a history (SCD type 2)."""

from __future__ import annotations

from functools import partial
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.assets.auto_cdc import auto_cdc_from_snapshot_table, auto_cdc_table
from lakehouse_assets.assets.automation import downstream_of_new_data
from lakehouse_assets.assets.landing import LandingFolder
from lakehouse_assets.assets.routed_table_asset import routed_table_asset
from lakehouse_assets.assets.sql_asset import SQL_FOLDER, sql_asset
from lakehouse_assets.assets.table_asset import (
    batch_from,
    stream_from,
    table_asset,
)
from lakehouse_assets.cdc.snapshots import Snapshot, SnapshotSource
from lakehouse_assets.ingestion.columns import METADATA_COLUMNS, SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.ingestion.lookup_csv import read_lookup_csv
from lakehouse_assets.outputs import RoutedRows
from lakehouse_assets.quality import silver as contracts
from lakehouse_assets.quality.silver import ROUTING_RULES
from lakehouse_assets.resource import LakehouseResource
from lakehouse_assets.spec import ColumnSource
from lakehouse_assets.storage.delta import CHANGE_DATA_FEED

#: The Pandera contracts checked on these tables after each materialization.
CONTRACTS = (contracts.PATIENTS, contracts.RECORDINGS_ENRICHED, contracts.RECORDINGS_QUARANTINE)
PATIENTS_SCHEMA = "mrn BIGINT, name STRING"
# The bronze `time` (Unix seconds) while the rules read the parsed timestamp as `time`.
BRONZE_TIME = "_bronze_time"
# How patient record changes apply, as Lakeflow's AUTO CDC takes it: by mrn, in seq order,
# `op = 'DELETE'` deleting; the operation, the sequence and bronze's own columns are not kept.
PATIENT_CHANGES: dict[str, Any] = {
    "ins": {"changes": stream_from(["bronze", "patient_changes"])},
    "keys": ["mrn"],
    "sequence_by": "seq",
    "apply_as_deletes": "op = 'DELETE'",
    "except_column_list": ["op", "seq", *METADATA_COLUMNS],
    "column_lineage": {column: [ColumnSource("bronze.patient_changes", column)] for column in ("mrn", "name")},
}


PATIENTS_LANDING = LandingFolder("patients", "csv", "The patients lookup as CSV (mrn, name).", streamed=False)
SNAPSHOTS_LANDING = LandingFolder(
    "patient_snapshots", "csv", "Full snapshots of the patients lookup as CSV (mrn, name), one file per snapshot, "
    "applied in name order.", streamed=False)


@table_asset(
    automation_condition=downstream_of_new_data(),
    layer="silver",
    deps=[PATIENTS_LANDING.key],
    write_mode="overwrite",
    columns=contracts.PATIENTS.described_columns(),
    metadata=PATIENTS_LANDING.metadata(),
)
def patients(context, lakehouse: LakehouseResource) -> DataFrame:  # type: ignore[no-untyped-def]
    """The patients lookup (mrn, name), loaded in batch from the landed CSV files, their
    columns matched by header name. A file lacking a column or holding a value that does not
    fit fails the load by name, and the table keeps its last good version."""
    # ``context`` is left unannotated: under postponed annotations Dagster sees a string and
    # refuses it; it is a dg.AssetExecutionContext.
    landing = lakehouse.settings().landing_path(PATIENTS_LANDING.source)
    lookup = read_lookup_csv(lakehouse.spark_session, landing, PATIENTS_SCHEMA)
    for message in lookup.warnings():
        context.log.warning(message)
    context.add_output_metadata({
        "files_read": dg.MetadataValue.int(len(lookup.files)),
        "columns_ignored": dg.MetadataValue.json(
            {file: list(columns) for file, columns in lookup.ignored_columns.items()}
        ),
    })
    return lookup.rows


@routed_table_asset(
    automation_condition=downstream_of_new_data(),
    layer="silver",
    name="recordings_enriched",
    quarantine_name="recordings_quarantine",
    description="Recordings of known patients with their names, `time` as a timestamp, and "
    "heart rates in (0, 300]: every routing rule passed.",
    quarantine_description="Bronze rows silver refused, as they landed, with `_quarantine_reason` "
    "naming the rules they failed (malformed records, unknown patients, heartrate <= 0, ...), or "
    "`duplicate` for a recording (device, patient, time) silver already holds.",
    ins={
        "recordings": stream_from(["bronze", "recordings"]),
        "patients": batch_from(["silver", "patients"]),
    },
    expectations=ROUTING_RULES,
    columns=contracts.RECORDINGS_ENRICHED.described_columns(),
    quarantine_columns=contracts.RECORDINGS_QUARANTINE.described_columns(),
    # The join keeps bronze's mrn (a left join: the lookup's may be null); the name is the
    # lookup's; time is parsed from bronze's Unix seconds.
    column_lineage={
        **{column: [ColumnSource("bronze.recordings", column)]
           for column in ("device_id", "mrn", "time", "heartrate", SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN)},
        "name": [ColumnSource("silver.patients", "name")],
    },
)
def recordings_enriched(recordings: DataFrame, patients: DataFrame) -> RoutedRows:
    """The course's join of recordings with patient names, `time` parsed as a timestamp;
    the rows the course would drop (unknown patient, heartrate <= 0, ...) are quarantined, and
    so is a recording landed twice (a file landed again under another name, a re-sent record):
    silver keeps one per device, patient and time."""
    bronze_columns = recordings.columns
    joined = recordings.alias("a").join(patients.alias("b"), F.col("a.mrn") == F.col("b.mrn"), "left").select(
        *[F.col(f"a.`{c}`").alias(BRONZE_TIME if c == "time" else c) for c in bronze_columns],
        F.col("b.name").alias("name"),
        F.from_unixtime(F.col("a.time"), "yyyy-MM-dd HH:mm:ss").cast("timestamp").alias("time"),
    )
    return RoutedRows(
        rows=joined,
        unique_by=["device_id", "mrn", "time"],
        # Each row keeps where it landed: the file and the line.
        passed_columns=["device_id", "mrn", "name", "time", "heartrate", SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN],
        quarantine_columns=[F.col(BRONZE_TIME).alias("time") if c == "time" else c for c in bronze_columns],
    )


@auto_cdc_table(layer="silver", stored_as_scd_type=1, automation_condition=downstream_of_new_data(),
                table_properties={CHANGE_DATA_FEED: "true"}, columns=contracts.PATIENTS_CURRENT.described_columns(),
                **PATIENT_CHANGES)
def patients_current(changes: DataFrame) -> DataFrame:
    """One row per live patient (mrn, name): each patient's latest change by `seq`, whatever
    order the changes landed in; a deleted patient is gone, and a late change older than the
    delete does not bring it back. Keeps a change data feed of its inserts, updates and deletes."""
    return changes


# The same flow in SQL, as Lakeflow writes it (CREATE FLOW ... AS AUTO CDC INTO ...).
patients_history = sql_asset(SQL_FOLDER / "patients_history.sql")


@auto_cdc_from_snapshot_table(layer="silver", keys=["mrn"], stored_as_scd_type=2,
                              deps=[SNAPSHOTS_LANDING.key], automation_condition=downstream_of_new_data(),
                              columns=contracts.PATIENTS_SNAPSHOT_HISTORY.described_columns(),
                              metadata=SNAPSHOTS_LANDING.metadata())
def patients_snapshot_history(lakehouse: LakehouseResource) -> SnapshotSource:
    """Every version of every patient (mrn, name) derived by comparing full snapshots of the
    patients lookup, landed as CSV files at landing/patient_snapshots/ (applied in name
    order): `__START_AT` and `__END_AT` are the numbers of the snapshots that opened and
    closed a version (AUTO CDC FROM SNAPSHOT)."""
    folder = lakehouse.settings().landing_path(SNAPSHOTS_LANDING.source)
    files = sorted(f.relative_path for f in folder.files(recursive=False) if f.relative_path.endswith(".csv"))

    def read(path: str) -> DataFrame:
        reader = lakehouse.spark_session.read.option("header", True).option("mode", "FAILFAST")
        return reader.schema(PATIENTS_SCHEMA).csv(path)

    return SnapshotSource(SNAPSHOTS_LANDING.key.to_user_string(), [
        Snapshot(number, partial(read, str(folder / name)), name) for number, name in enumerate(files, start=1)])
