from __future__ import annotations

from typing import Any

import pytest

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.simulator import BAD_KINDS, RecordKind, SimulatorConfig


@pytest.mark.parametrize(
    "options",
    [
        {"seed": -1},
        {"seed": 1.5},
        {"records_per_file": 0},
        {"records_per_file": True},
        {"bad_rate": -0.01},
        {"bad_rate": 1.01},
        {"bad_rate": float("nan")},
        {"bad_rate": "0.1"},
        {"bad_kinds": ()},
        {"bad_kinds": ("good",)},
        {"bad_kinds": ("malformed", "malformed")},
        {"bad_kinds": ("truncated",)},
        {"bad_kinds": "malformed"},
        {"patient_count": 0},
        {"device_count": 0},
        {"patient_count": 10, "device_count": 11},
        {"files_per_year": 0},
        {"files_per_year": 1_000_000},
    ],
    ids=repr,
)
def test_invalid_settings_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        SimulatorConfig(**options)


def test_bad_kinds_accept_names_and_keep_their_order() -> None:
    config = SimulatorConfig(bad_kinds=["unknown_patient", "malformed"])  # type: ignore[arg-type]
    assert config.bad_kinds == (RecordKind.UNKNOWN_PATIENT, RecordKind.MALFORMED)
    assert SimulatorConfig().bad_kinds == BAD_KINDS
    assert hash(config) == hash(SimulatorConfig(bad_kinds=("unknown_patient", "malformed")))


@pytest.mark.parametrize(("rate", "numerator", "denominator"),
                         [(0.29, 29, 100), (0.01, 1, 100), (1 / 3, 1, 3), (0.0, 0, 1), (1, 1, 1)])
def test_bad_rate_is_read_as_the_fraction_meant(rate: float, numerator: int,
                                                denominator: int) -> None:
    fraction = SimulatorConfig(bad_rate=rate).bad_fraction
    assert (fraction.numerator, fraction.denominator) == (numerator, denominator)
