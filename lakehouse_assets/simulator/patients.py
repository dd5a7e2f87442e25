"""The simulated patients: who they are (the patients CSV) and what their devices record.

The CSV is the course's PII lookup: header ``mrn,name``, one row per patient, ordered by mrn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lakehouse_assets.simulator._random import Stream, rng

PATIENTS_CSV_HEADER = "mrn,name"
#: Medical record numbers have eight digits.
MRN_LOW = 10_000_000
MRN_HIGH = 100_000_000  # exclusive

# Common given and family names; 60 x 60 combinations, so names repeat now and then, as in
# any hospital. None contains a comma or a quote, so the CSV needs no quoting.
_FIRST_NAMES = (
    "Aaliyah", "Adam", "Aisha", "Alejandro", "Amara", "Andrew", "Anna", "Ben", "Carlos",
    "Chen", "Chloe", "Daniel", "David", "Diego", "Elena", "Emily", "Emma", "Fatima", "Grace",
    "Hannah", "Hiroshi", "Ibrahim", "Isabella", "Jack", "James", "Jasmine", "John", "Jose",
    "Julia", "Kai", "Kenji", "Laura", "Leila", "Liam", "Lucas", "Maria", "Mateo", "Maya",
    "Mei", "Michael", "Mohammed", "Nadia", "Noah", "Olivia", "Omar", "Priya", "Rahul",
    "Rosa", "Samuel", "Sara", "Sofia", "Thomas", "Valentina", "Victor", "William", "Yara",
    "Yusuf", "Zara", "Zoe", "Ethan",
)
_LAST_NAMES = (
    "Adams", "Ahmed", "Alvarez", "Anderson", "Bailey", "Brown", "Campbell", "Chen", "Clark",
    "Cohen", "Davis", "Diaz", "Edwards", "Evans", "Fischer", "Garcia", "Gonzalez", "Green",
    "Hall", "Hernandez", "Hill", "Ito", "Jackson", "Johnson", "Kim", "Kowalski", "Lee",
    "Lewis", "Lopez", "Martin", "Martinez", "Miller", "Moore", "Murphy", "Nguyen", "Novak",
    "Okafor", "Patel", "Perez", "Petrov", "Ramirez", "Reed", "Rivera", "Robinson", "Rossi",
    "Sanchez", "Schmidt", "Scott", "Silva", "Singh", "Smith", "Suzuki", "Taylor", "Thompson",
    "Walker", "Wang", "White", "Williams", "Wilson", "Young",
)

# Resting heart rates of adults at rest: most fall between 60 and 100 bpm.
_RESTING_MEAN = 76.0
_RESTING_SD = 7.0
_RESTING_LOW = 58.0
_RESTING_HIGH = 96.0


@dataclass(frozen=True)
class Patient:
    """One simulated patient. Only ``mrn`` and ``name`` are published (in the CSV); the device
    and resting heart rate only shape the patient's recordings."""

    mrn: int
    name: str
    device_id: int
    resting_heartrate: float


def generate_patients(*, seed: int, patient_count: int, device_count: int) -> tuple[Patient, ...]:
    """The data set's patients, ordered by mrn: distinct 8-digit mrns, "First Last" names, and
    ``device_count`` devices shared out so that every device has patients."""
    gen = rng(seed, Stream.PATIENTS)
    mrns = np.sort(gen.choice(MRN_HIGH - MRN_LOW, size=patient_count, replace=False) + MRN_LOW)
    firsts = gen.integers(len(_FIRST_NAMES), size=patient_count)
    lasts = gen.integers(len(_LAST_NAMES), size=patient_count)
    # Device ids look like asset tags (3 digits) rather than 0..n-1, so a join on the wrong
    # column fails loudly in downstream tests.
    device_ids = np.sort(gen.choice(900, size=device_count, replace=False) + 100)
    # Deal devices round-robin over a shuffled patient order: each device gets
    # patient_count / device_count patients (give or take one).
    order = gen.permutation(patient_count)
    device_of = np.empty(patient_count, dtype=np.int64)
    device_of[order] = device_ids[np.arange(patient_count) % device_count]
    resting = np.clip(gen.normal(_RESTING_MEAN, _RESTING_SD, size=patient_count),
                      _RESTING_LOW, _RESTING_HIGH)
    return tuple(
        Patient(mrn=int(mrn), name=f"{_FIRST_NAMES[first]} {_LAST_NAMES[last]}",
                device_id=int(device), resting_heartrate=float(rate))
        for mrn, first, last, device, rate in zip(mrns, firsts, lasts, device_of, resting, strict=True))


def patients_csv(patients: tuple[Patient, ...]) -> bytes:
    """The patients CSV exactly as landed: header ``mrn,name``, ``\\n`` line ends, UTF-8."""
    lines = [PATIENTS_CSV_HEADER, *(f"{p.mrn},{p.name}" for p in patients)]
    return ("\n".join(lines) + "\n").encode("utf-8")
