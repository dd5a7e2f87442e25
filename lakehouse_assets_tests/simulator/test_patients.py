from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from lakehouse_assets.simulator import Dataset, SimulatorConfig, generate_patients
from lakehouse_assets_tests.simulator.reading import read_patients


def test_patients_are_about_a_thousand_with_distinct_eight_digit_mrns() -> None:
    patients = generate_patients(seed=3, patient_count=1000, device_count=50)
    mrns = [p.mrn for p in patients]
    assert len(patients) == 1000
    assert len(set(mrns)) == 1000
    assert all(10_000_000 <= mrn <= 99_999_999 for mrn in mrns)
    assert mrns == sorted(mrns)


def test_names_look_like_first_and_last_names() -> None:
    patients = generate_patients(seed=3, patient_count=1000, device_count=50)
    assert all(re.fullmatch(r"[A-Z][a-z]+ [A-Z][a-z]+", p.name) for p in patients)
    # Varied, not one name repeated.
    assert len({p.name for p in patients}) > 500


def test_every_device_is_shared_by_a_similar_number_of_patients() -> None:
    patients = generate_patients(seed=3, patient_count=1000, device_count=50)
    per_device = Counter(p.device_id for p in patients)
    assert len(per_device) == 50
    assert set(per_device.values()) == {20}


def test_patients_are_deterministic_for_a_seed_and_differ_between_seeds() -> None:
    first = generate_patients(seed=11, patient_count=200, device_count=10)
    again = generate_patients(seed=11, patient_count=200, device_count=10)
    other = generate_patients(seed=12, patient_count=200, device_count=10)
    assert first == again
    assert {p.mrn for p in first} != {p.mrn for p in other}


def test_patients_csv_parses_back_to_the_patients(tmp_path: Path) -> None:
    dataset = Dataset(SimulatorConfig(seed=5))
    path = tmp_path / "patients.csv"
    path.write_bytes(dataset.patients_csv())
    assert read_patients(path) == {p.mrn: p.name for p in dataset.patients}
