from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from lakehouse_assets.simulator import BAD_KINDS, Dataset, RecordKind, SimulatorConfig
from lakehouse_assets.simulator.bad_records import bad_kinds_of_file
from lakehouse_assets_tests.simulator.reading import classify


def lines_and_kinds(config: SimulatorConfig, files: int) -> list[tuple[str, RecordKind]]:
    dataset = Dataset(config)
    return [pair for index in range(1, files + 1)
            for pair in zip(dataset.file(index).content.decode().split("\n")[:-1],
                            dataset.file(index).kinds, strict=True)]


@pytest.mark.parametrize("kind", BAD_KINDS, ids=str)
def test_each_kind_is_what_an_independent_reader_finds(kind: RecordKind) -> None:
    config = SimulatorConfig(seed=2, records_per_file=400, bad_rate=0.1, bad_kinds=(kind,))
    dataset = Dataset(config)
    known = {p.mrn for p in dataset.patients}
    pairs = lines_and_kinds(config, 3)
    assert Counter(k for _, k in pairs) == {RecordKind.GOOD: 1080, kind: 120}
    for line, generated_kind in pairs:
        assert classify(line, known) == generated_kind.value, line


@pytest.mark.parametrize(
    ("bad_rate", "records_per_file", "files", "expected_bad"),
    [
        (0.0, 100, 5, 0),
        (0.01, 10, 1000, 100),  # 0.1 per file: the share still adds up
        (0.01, 5000, 20, 1000),
        (0.29, 100, 7, 203),  # 0.29 is not exactly representable
        (1 / 3, 10, 3, 10),
        (0.5, 1, 5, 2),
        (1.0, 10, 3, 30),
    ],
)
def test_bad_records_add_up_to_the_rate_exactly(bad_rate: float, records_per_file: int,
                                                files: int, expected_bad: int) -> None:
    config = SimulatorConfig(seed=1, bad_rate=bad_rate, records_per_file=records_per_file)
    per_file = [bad_kinds_of_file(config, index) for index in range(1, files + 1)]
    assert sum(len(kinds) for kinds in per_file) == expected_bad
    assert all(len(kinds) <= records_per_file for kinds in per_file)
    # Split evenly among the kinds, and in the kinds' order.
    tally = Counter(kind for kinds in per_file for kind in kinds)
    if expected_bad:
        assert max(tally.values()) - min(tally.values()) <= 1
        assert [kind for kinds in per_file for kind in kinds][:4] == list(BAD_KINDS)[:expected_bad]


def test_files_report_the_kinds_they_hold() -> None:
    generated = Dataset(SimulatorConfig(seed=4, records_per_file=1000, bad_rate=0.05)).file(9)
    assert generated.counts.bad == 50
    assert generated.counts.total == 1000
    assert Counter(generated.kinds)[RecordKind.UNKNOWN_PATIENT] == generated.counts.unknown_patient


def test_wrong_types_hit_both_heartrate_and_time_with_strings() -> None:
    config = SimulatorConfig(seed=3, records_per_file=200, bad_rate=0.2,
                             bad_kinds=(RecordKind.WRONG_TYPE,))
    fields = Counter()
    for line, kind in lines_and_kinds(config, 5):
        if kind is RecordKind.WRONG_TYPE:
            record = json.loads(line)
            wrong = [k for k, v in record.items() if isinstance(v, str)]
            assert len(wrong) == 1
            # Not a string any JSON reader would coerce to a number.
            assert record[wrong[0]] not in {"NaN", "Infinity", "-Infinity"}
            with pytest.raises(ValueError):
                float(record[wrong[0]])
            fields[wrong[0]] += 1
    assert set(fields) == {"heartrate", "time"}


def test_non_positive_heartrates_include_zero_minus_one_and_negated_readings() -> None:
    config = SimulatorConfig(seed=3, records_per_file=200, bad_rate=0.2,
                             bad_kinds=(RecordKind.NON_POSITIVE_HEARTRATE,))
    rates = [json.loads(line)["heartrate"] for line, kind in lines_and_kinds(config, 3)
             if kind is RecordKind.NON_POSITIVE_HEARTRATE]
    assert all(rate <= 0 for rate in rates)
    assert {0.0, -1.0} <= set(rates)
    assert any(rate < -1 for rate in rates)


def test_unknown_patients_have_plausible_mrns() -> None:
    config = SimulatorConfig(seed=3, records_per_file=200, bad_rate=0.2,
                             bad_kinds=(RecordKind.UNKNOWN_PATIENT,))
    known = {p.mrn for p in Dataset(config).patients}
    mrns = [json.loads(line)["mrn"] for line, kind in lines_and_kinds(config, 3)
            if kind is RecordKind.UNKNOWN_PATIENT]
    assert len(mrns) == 120
    assert all(10_000_000 <= mrn <= 99_999_999 and mrn not in known for mrn in mrns)


def test_malformed_lines_are_single_non_empty_lines() -> None:
    config = SimulatorConfig(seed=3, records_per_file=200, bad_rate=0.2,
                             bad_kinds=(RecordKind.MALFORMED,))
    malformed = [line for line, kind in lines_and_kinds(config, 3)
                 if kind is RecordKind.MALFORMED]
    assert len(malformed) == 120
    assert all(line.startswith('{"device_id":') and not line.endswith("}") for line in malformed)
    assert len({len(line) for line in malformed}) > 20  # cut at varying points


def test_an_unknown_mrn_is_redrawn_until_it_is_no_patients() -> None:
    from lakehouse_assets.simulator.bad_records import _unknown_mrn

    first_draws = np.random.default_rng(5).integers(10_000_000, 100_000_000, size=3).tolist()
    mrn = _unknown_mrn(frozenset(first_draws[:2]), np.random.default_rng(5))
    assert mrn == first_draws[2]
