"""Bronze contracts: raw records as landed, malformed ones included, with the ingestion's metadata
columns. Rescued data is expected here, so at bronze it is a warning; silver quarantines those rows.
"""

from __future__ import annotations

import pyspark.sql.types as T

from lakehouse_assets.ingestion.columns import INGESTED_AT_COLUMN as INGESTED_AT
from lakehouse_assets.ingestion.columns import RESCUED_DATA_COLUMN as RESCUED_DATA
from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN as SOURCE_FILE
from lakehouse_assets.ingestion.columns import SOURCE_LINE_COLUMN as SOURCE_LINE
from lakehouse_assets.quality.contract import Contract, model
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


#: The ingestion's metadata columns, on every bronze table.
INGESTION_COLUMNS = {
    RESCUED_DATA: (T.StringType(),
                   "What did not fit the schema (a malformed line, a value of the wrong type), as JSON"),
    SOURCE_FILE: (T.StringType(), "The landed file the row was read from"),
    SOURCE_LINE: (T.LongType(),
                  "The line of the landed file the record is on (1-based; its position in a multi-line file)"),
    INGESTED_AT: (T.TimestampType(), "When the row was ingested into bronze"),
}

#: bronze.recordings' columns: the landed JSON fields, typed (``time`` in Unix seconds), and the metadata.
RECORDINGS_FIELDS = {
    "device_id": (T.LongType(), "The recording device, as landed (null if missing or not a number)"),
    "mrn": (T.LongType(), "The patient's medical record number, as landed"),
    "time": (T.DoubleType(), "When the heart rate was recorded, in Unix seconds, as landed"),
    "heartrate": (T.DoubleType(), "The heart rate recorded, in beats per minute, as landed"),
    **INGESTION_COLUMNS}
# Not strict: ingestion may add columns as the source evolves.
RecordingsBronze = model("RecordingsBronze", "bronze.recordings", RECORDINGS_FIELDS, strict=False)

PatientChangesBronze = model("PatientChangesBronze", "bronze.patient_changes", {
    "mrn": (T.LongType(), "The medical record number of the patient changed"),
    "name": (T.StringType(), "The patient's name after the change (ignored by a delete)"),
    "op": (T.StringType(), "UPSERT or DELETE"),
    "seq": (T.LongType(), "Orders the changes of a patient: a higher seq is a later change"),
    **INGESTION_COLUMNS}, strict=False)


RECORDINGS = Contract(
    "bronze",
    "recordings",
    RecordingsBronze,
    rules=(SOURCE_FILE_PRESENT, INGESTED_AT_PRESENT, RESCUED_DATA_EMPTY.with_severity(Severity.WARN)),
    description="Raw recordings with their ingestion metadata",
)

PATIENT_CHANGES = Contract("bronze", "patient_changes", PatientChangesBronze,
                           description="Patient record changes with their ingestion metadata")
