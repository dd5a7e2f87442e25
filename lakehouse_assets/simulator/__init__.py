"""The reference data set and its lander, like the course's ``DA.data_factory.load()``.

Heart-rate recordings over 2020 as JSON lines (``device_id``, ``mrn``, ``time``,
``heartrate``), plus the patients CSV (``mrn,name``) they join to. Deterministic for a seed,
landed file after file in time order (into a local folder or onto object storage), with a
controllable, exactly counted share of bad records::

    result = land("lakehouse_data/landing", files=3, records_per_file=5_000, bad_rate=0.01, seed=42)
    result.counts.unknown_patient  # exactly how many rows the silver join must drop
"""

from lakehouse_assets.simulator.config import (
    DEFAULT_DEVICE_COUNT,
    DEFAULT_FILES_PER_YEAR,
    DEFAULT_PATIENT_COUNT,
    DEFAULT_RECORDS_PER_FILE,
    DEFAULT_SEED,
    YEAR,
    YEAR_END,
    YEAR_START,
    SimulatorConfig,
)
from lakehouse_assets.simulator.dataset import Dataset, GeneratedFile
from lakehouse_assets.simulator.errors import (
    DatasetExhaustedError,
    LandingError,
    LandingStateError,
)
from lakehouse_assets.simulator.kinds import BAD_KINDS, RecordCounts, RecordKind
from lakehouse_assets.simulator.lander import (
    LandingResult,
    land,
    land_continuously,
    next_file_index,
)
from lakehouse_assets.simulator.layout import (
    LandingLayout,
    recording_file_name,
)
from lakehouse_assets.simulator.manifest import (
    DatasetIdentity,
    LandedFile,
    LandingManifest,
    read_manifest,
)
from lakehouse_assets.simulator.patient_changes import (
    DEFAULT_CHANGES_PER_FILE,
    DEFAULT_LATE_SHARE,
    PATIENT_CHANGES_DIR,
    PatientChangesResult,
    land_patient_changes,
)
from lakehouse_assets.simulator.patients import Patient, generate_patients
from lakehouse_assets.simulator.recordings import file_time_range

__all__ = [
    "BAD_KINDS",
    "DEFAULT_CHANGES_PER_FILE",
    "DEFAULT_DEVICE_COUNT",
    "DEFAULT_FILES_PER_YEAR",
    "DEFAULT_LATE_SHARE",
    "DEFAULT_PATIENT_COUNT",
    "DEFAULT_RECORDS_PER_FILE",
    "DEFAULT_SEED",
    "PATIENT_CHANGES_DIR",
    "YEAR",
    "YEAR_END",
    "YEAR_START",
    "Dataset",
    "DatasetExhaustedError",
    "DatasetIdentity",
    "GeneratedFile",
    "LandedFile",
    "LandingError",
    "LandingLayout",
    "LandingManifest",
    "LandingResult",
    "LandingStateError",
    "Patient",
    "PatientChangesResult",
    "RecordCounts",
    "RecordKind",
    "SimulatorConfig",
    "file_time_range",
    "generate_patients",
    "land",
    "land_continuously",
    "land_patient_changes",
    "next_file_index",
    "read_manifest",
    "recording_file_name",
]
