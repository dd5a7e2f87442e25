"""Bronze contracts: raw records as landed, with the ingestion's metadata columns.

Bronze keeps everything, malformed records included, so its value columns may be null;
its promises are about structure: the columns are there, with their types, and every row
says which file it came from and when it was ingested. Rescued data is expected here (that
is what rescuing is for), so at bronze it is a warning; silver quarantines those rows.
"""

from __future__ import annotations

import pandera.pyspark as pa
import pyspark.sql.types as T

from lakehouse_assets.ingestion.columns import INGESTED_AT_COLUMN as INGESTED_AT
from lakehouse_assets.ingestion.columns import RESCUED_DATA_COLUMN as RESCUED_DATA
from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN as SOURCE_FILE
from lakehouse_assets.ingestion.columns import SOURCE_LINE_COLUMN as SOURCE_LINE
from lakehouse_assets.quality.contract import Contract
from lakehouse_assets.quality.rules import Severity, not_null, null_or_empty

RESCUED_DATA_EMPTY = null_or_empty(
    RESCUED_DATA,
    name="rescued_data_empty",
    description="Nothing was rescued: the record parsed and every value fit its column "
    "(non-empty _rescued_data marks a malformed record or a value of the wrong type)",
)
SOURCE_FILE_PRESENT = not_null(
    SOURCE_FILE, name="source_file_present",
    description="_source_file names the landed file the row came from",
)
INGESTED_AT_PRESENT = not_null(
    INGESTED_AT, name="ingested_at_present",
    description="_ingested_at says when the row was ingested",
)


class RecordingsBronze(pa.DataFrameModel):  # type: ignore[type-arg]
    """bronze.recordings: the landed JSON fields, typed (``time`` in Unix seconds), plus
    the ingestion's metadata. Not strict: ingestion may add columns as the source evolves."""

    device_id: T.LongType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The recording device, as landed (null if missing or not a number)")
    mrn: T.LongType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The patient's medical record number, as landed")
    time: T.DoubleType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="When the heart rate was recorded, in Unix seconds, as landed")
    heartrate: T.DoubleType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The heart rate recorded, in beats per minute, as landed")
    rescued_data: T.StringType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, alias=RESCUED_DATA,
        description="What did not fit the schema (a malformed line, a value of the wrong type), as JSON")
    source_file: T.StringType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, alias=SOURCE_FILE, description="The landed file the row was read from")
    source_line: T.LongType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, alias=SOURCE_LINE,
        description="The line of the landed file the record is on (1-based; its position in a multi-line file)")
    ingested_at: T.TimestampType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, alias=INGESTED_AT, description="When the row was ingested into bronze")

    class Config:
        name = "bronze.recordings"
        strict = False


class PatientChangesBronze(pa.DataFrameModel):  # type: ignore[type-arg]
    """bronze.patient_changes: changes to patient records as landed, with the ingestion's metadata."""

    mrn: T.LongType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The medical record number of the patient changed")
    name: T.StringType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The patient's name after the change (ignored by a delete)")
    op: T.StringType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="UPSERT or DELETE")
    seq: T.LongType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="Orders the changes of a patient: a higher seq is a later change")
    rescued_data: T.StringType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, alias=RESCUED_DATA,
        description="What did not fit the schema (a malformed line, a value of the wrong type), as JSON")
    source_file: T.StringType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, alias=SOURCE_FILE, description="The landed file the row was read from")
    source_line: T.LongType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, alias=SOURCE_LINE,
        description="The line of the landed file the record is on (1-based; its position in a multi-line file)")
    ingested_at: T.TimestampType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, alias=INGESTED_AT, description="When the row was ingested into bronze")

    class Config:
        name = "bronze.patient_changes"
        strict = False


RECORDINGS = Contract(
    "bronze",
    "recordings",
    RecordingsBronze,
    rules=(SOURCE_FILE_PRESENT, INGESTED_AT_PRESENT, RESCUED_DATA_EMPTY.with_severity(Severity.WARN)),
    description="Raw recordings with their ingestion metadata",
)

PATIENT_CHANGES = Contract("bronze", "patient_changes", PatientChangesBronze,
                           description="Patient record changes with their ingestion metadata")

#: The bronze recordings' columns, in order: what the quarantine keeps of every row.
RECORDINGS_COLUMNS: tuple[str, ...] = tuple(RECORDINGS.columns)

__all__ = [
    "INGESTED_AT_PRESENT",
    "PATIENT_CHANGES",
    "RECORDINGS",
    "RECORDINGS_COLUMNS",
    "RESCUED_DATA_EMPTY",
    "PatientChangesBronze",
    "RecordingsBronze",
    "SOURCE_FILE_PRESENT",
]
