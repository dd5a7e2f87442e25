"""Gold contracts: the aggregates reports read."""

from __future__ import annotations

import pandera.pyspark as pa
import pyspark.sql.types as T

from lakehouse_assets.quality.contract import Contract
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


class DailyPatientAvg(pa.DataFrameModel):  # type: ignore[type-arg]
    """gold.daily_patient_avg: the average heart rate per patient and day."""

    mrn: T.LongType() = pa.Field(nullable=True)  # type: ignore[valid-type]
    name: T.StringType() = pa.Field(nullable=True)  # type: ignore[valid-type]
    avg_heartrate: T.DoubleType() = pa.Field(nullable=True)  # type: ignore[valid-type]
    date: T.TimestampType() = pa.Field(nullable=True)  # type: ignore[valid-type]

    class Config:
        name = "gold.daily_patient_avg"
        strict = True


class DeviceCounts(pa.DataFrameModel):  # type: ignore[type-arg]
    """gold.device_counts: recordings per device."""

    device_id: T.LongType() = pa.Field(nullable=True)  # type: ignore[valid-type]
    total_recordings: T.LongType() = pa.Field(nullable=True)  # type: ignore[valid-type]

    class Config:
        name = "gold.device_counts"
        strict = True


class Heartrate5Min(pa.DataFrameModel):  # type: ignore[type-arg]
    """gold.heartrate_5min: heart rate per device in 5-minute tumbling windows."""

    device_id: T.LongType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The recording device")
    window_start: T.TimestampType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The start of the 5-minute window (inclusive)")
    window_end: T.TimestampType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The end of the 5-minute window (exclusive)")
    recordings: T.LongType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="How many heart rates the device recorded in the window")
    min_heartrate: T.DoubleType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The lowest heart rate in the window, in beats per minute")
    mean_heartrate: T.DoubleType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The mean heart rate in the window, in beats per minute")
    max_heartrate: T.DoubleType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The highest heart rate in the window, in beats per minute")

    class Config:
        name = "gold.heartrate_5min"
        strict = True


class PatientChanges(pa.DataFrameModel):  # type: ignore[type-arg]
    """gold.patient_changes: every change made to silver.patients_current, from its change data feed."""

    mrn: T.LongType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The medical record number of the patient changed")
    name: T.StringType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The name after an insert or update; the last one before a delete")
    change: T.StringType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="insert, update or delete")
    patients_version: T.LongType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="The version of silver.patients_current whose commit made the change")
    changed_at: T.TimestampType() = pa.Field(  # type: ignore[valid-type]
        nullable=True, description="When that commit was made")

    class Config:
        name = "gold.patient_changes"
        strict = True


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

__all__ = [
    "AVG_HEARTRATE_IN_RANGE",
    "DAILY_PATIENT_AVG",
    "DATE_PRESENT",
    "DEVICE_COUNTS",
    "DEVICE_ID_KNOWN",
    "DailyPatientAvg",
    "DeviceCounts",
    "HEARTRATE_5MIN",
    "Heartrate5Min",
    "PATIENT_CHANGES",
    "PatientChanges",
    "TOTAL_RECORDINGS_POSITIVE",
]
