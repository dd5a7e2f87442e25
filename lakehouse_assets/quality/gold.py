"""Gold contracts: the aggregates reports read."""

from __future__ import annotations

import pyspark.sql.types as T

from lakehouse_assets.quality.contract import Contract, model
from lakehouse_assets.quality.rules import Severity, UniqueKey, greater_than, in_range, not_null
from lakehouse_assets.quality.silver import MAX_HEARTRATE, MRN_POSITIVE

AVG_HEARTRATE_IN_RANGE = in_range(
    "avg_heartrate", 0, MAX_HEARTRATE, name="avg_heartrate_in_range",
    description=f"avg_heartrate in (0, {MAX_HEARTRATE:g}]: an average of valid heart rates",
)
DATE_PRESENT = not_null("date", name="date_present", description="every average is for a day")
TOTAL_RECORDINGS_POSITIVE = greater_than(
    "total_recordings", 0, name="total_recordings_positive",
    description="a device row counts at least one recording",
)
DEVICE_ID_KNOWN = not_null(
    "device_id", name="device_id_known", severity=Severity.WARN,
    description="recordings without a device_id are counted under a null device",
)


# The average heart rate per patient and day.
DailyPatientAvg = model("DailyPatientAvg", "gold.daily_patient_avg", {
    "mrn": (T.LongType(), ""),
    "name": (T.StringType(), ""),
    "avg_heartrate": (T.DoubleType(), ""),
    "date": (T.TimestampType(), ""),
})

DeviceCounts = model("DeviceCounts", "gold.device_counts", {
    "device_id": (T.LongType(), ""),
    "total_recordings": (T.LongType(), ""),
})

Heartrate5Min = model("Heartrate5Min", "gold.heartrate_5min", {
    "device_id": (T.LongType(), "The recording device"),
    "window_start": (T.TimestampType(), "The start of the 5-minute window (inclusive)"),
    "window_end": (T.TimestampType(), "The end of the 5-minute window (exclusive)"),
    "recordings": (T.LongType(), "How many heart rates the device recorded in the window"),
    "min_heartrate": (T.DoubleType(), "The lowest heart rate in the window, in beats per minute"),
    "mean_heartrate": (T.DoubleType(), "The mean heart rate in the window, in beats per minute"),
    "max_heartrate": (T.DoubleType(), "The highest heart rate in the window, in beats per minute"),
})

# Every change made to silver.patients_current, from its change data feed.
PatientChanges = model("PatientChanges", "gold.patient_changes", {
    "mrn": (T.LongType(), "The medical record number of the patient changed"),
    "name": (T.StringType(), "The name after an insert or update; the last one before a delete"),
    "change": (T.StringType(), "insert, update or delete"),
    "patients_version": (T.LongType(), "The version of silver.patients_current whose commit made the change"),
    "changed_at": (T.TimestampType(), "When that commit was made"),
})


HEARTRATE_5MIN = Contract("gold", "heartrate_5min", Heartrate5Min, description="Heart rate per device and window")
PATIENT_CHANGES = Contract("gold", "patient_changes", PatientChanges, description="Every patient change")

DAILY_PATIENT_AVG = Contract(
    "gold",
    "daily_patient_avg",
    DailyPatientAvg,
    rules=(AVG_HEARTRATE_IN_RANGE, MRN_POSITIVE, DATE_PRESENT),
    unique=(UniqueKey("one_row_per_patient_day", "one row per (mrn, date)", ("mrn", "date")),),
    description="One plausible average per patient and day",
)

DEVICE_COUNTS = Contract(
    "gold",
    "device_counts",
    DeviceCounts,
    rules=(TOTAL_RECORDINGS_POSITIVE, DEVICE_ID_KNOWN),
    unique=(UniqueKey("one_row_per_device", "one row per device_id", ("device_id",)),),
    description="One positive count per device",
)
