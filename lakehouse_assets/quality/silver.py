"""Silver contracts and the rules that route the silver stream: a row failing an ERROR rule goes
to ``silver.recordings_quarantine`` (:mod:`~lakehouse_assets.quality.quarantine`). The same Rule
objects are the silver table's asset checks, so the stream and the checks agree.
"""

from __future__ import annotations

import datetime as dt

import pyspark.sql.types as T

from lakehouse_assets.cdc.spec import END_AT, START_AT
from lakehouse_assets.ingestion.columns import SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN
from lakehouse_assets.quality.bronze import RECORDINGS_FIELDS, RESCUED_DATA_EMPTY
from lakehouse_assets.quality.contract import Contract, model
from lakehouse_assets.quality.quarantine import QUARANTINE_REASON
from lakehouse_assets.quality.rules import (
    Rule,
    Severity,
    UniqueKey,
    at_most,
    greater_than,
    not_null,
    plausible_time,
    rules_reading,
)

EARLIEST_TIME = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
FUTURE_TOLERANCE = dt.timedelta(days=1)
MAX_HEARTRATE = 300.0

KNOWN_PATIENT = not_null(
    "name", name="known_patient",
    description="The mrn matched a patient in silver.patients (the joined name is not null)",
)
HEARTRATE_POSITIVE = greater_than(
    "heartrate", 0, name="heartrate_positive",
    description="heartrate > 0: zero or less means no patient on the device, or a transmission error",
)
HEARTRATE_IN_RANGE = at_most(
    "heartrate", MAX_HEARTRATE, name="heartrate_in_range",
    description=f"heartrate <= {MAX_HEARTRATE:g} bpm: anything higher is not a human heart rate",
)
MRN_POSITIVE = greater_than("mrn", 0, name="mrn_positive", description="mrn is a positive number")
TIME_PLAUSIBLE = plausible_time(
    "time", earliest=EARLIEST_TIME, future_tolerance=FUTURE_TOLERANCE, name="time_plausible",
    description="time is a timestamp between 2000-01-01 and one day from now",
)
DEVICE_ID_PRESENT = not_null(
    "device_id", name="device_id_present", severity=Severity.WARN,
    description="device_id is known (a recording without one still counts for its patient)",
)
QUARANTINE_REASON_PRESENT = not_null(
    QUARANTINE_REASON, name="quarantine_reason_present",
    description="every quarantined row says which rules it failed",
)
NAME_PRESENT = not_null("name", name="name_present", description="every patient has a name")

#: The rules the silver query applies to bronze rows joined with the patients' names.
#: ERROR rules route (a failing row is quarantined); WARN rules are only reported.
ROUTING_RULES: tuple[Rule, ...] = (
    RESCUED_DATA_EMPTY,
    KNOWN_PATIENT,
    MRN_POSITIVE,
    HEARTRATE_POSITIVE,
    HEARTRATE_IN_RANGE,
    TIME_PLAUSIBLE,
    DEVICE_ID_PRESENT,
)


RecordingsEnriched = model("RecordingsEnriched", "silver.recordings_enriched", {
    "device_id": (T.LongType(), "The recording device (null when the recording named none)"),
    "mrn": (T.LongType(), "The patient's medical record number, a patient of silver.patients"),
    "name": (T.StringType(), "The patient's name, from silver.patients"),
    "time": (T.TimestampType(), "When the heart rate was recorded (UTC), parsed from bronze's Unix seconds"),
    "heartrate": (T.DoubleType(), f"The heart rate recorded, in beats per minute, in (0, {MAX_HEARTRATE:g}]"),
    SOURCE_FILE_COLUMN: (T.StringType(), "The landed file the recording was read from"),
    SOURCE_LINE_COLUMN: (T.LongType(), "The line of that file the recording is on (1-based)"),
})

# The bronze rows silver refused, as they were, with the rules they failed.
RecordingsQuarantine = model("RecordingsQuarantine", "silver.recordings_quarantine", {
    **RECORDINGS_FIELDS,
    QUARANTINE_REASON: (T.StringType(), "The names of the rules the row failed, comma-separated, or `duplicate`"),
}, strict=False)

Patients = model("Patients", "silver.patients", {
    "mrn": (T.LongType(), "The patient's medical record number, one row each"),
    "name": (T.StringType(), "The patient's name, as in the landed lookup"),
})

# One row per live patient, the latest change applied (SCD type 1).
PatientsCurrent = model("PatientsCurrent", "silver.patients_current", {
    "mrn": (T.LongType(), "The patient's medical record number, one row per live patient"),
    "name": (T.StringType(), "The patient's name after the latest change by seq"),
})

# Every version of every patient, from full snapshots (SCD type 2).
PatientsSnapshotHistory = model("PatientsSnapshotHistory", "silver.patients_snapshot_history", {
    "mrn": (T.LongType(), "The patient's medical record number"),
    "name": (T.StringType(), "The patient's name in this version"),
    START_AT: (T.LongType(), "The number of the snapshot that opened this version"),
    END_AT: (T.LongType(), "The number of the snapshot that closed this version (null while current)"),
})

RECORDINGS_ENRICHED = Contract(
    "silver",
    "recordings_enriched",
    RecordingsEnriched,
    # The routing rules that can be read on the silver table itself (it has no
    # _rescued_data): computed, so the stream and the checks cannot drift apart.
    rules=rules_reading(ROUTING_RULES, list(RecordingsEnriched.to_schema().columns)),
    description="Recordings that passed every routing rule",
)

RECORDINGS_QUARANTINE = Contract(
    "silver",
    "recordings_quarantine",
    RecordingsQuarantine,
    rules=(QUARANTINE_REASON_PRESENT,),
    description="Bronze rows the silver query refused, with the rules they failed",
)

PATIENTS = Contract(
    "silver",
    "patients",
    Patients,
    rules=(MRN_POSITIVE, NAME_PRESENT),
    unique=(UniqueKey("mrn_unique", "one row per mrn: a join on mrn must not multiply recordings", ("mrn",)),),
    description="One named patient per mrn",
)

PATIENTS_CURRENT = Contract("silver", "patients_current", PatientsCurrent,
                            description="One row per live patient")
PATIENTS_SNAPSHOT_HISTORY = Contract("silver", "patients_snapshot_history", PatientsSnapshotHistory,
                                     description="Every version of every patient, by snapshot")
