"""The one Definitions object loads without Spark and holds the promised graph."""

from __future__ import annotations

import dagster as dg

from lakehouse_assets.definitions import defs

EXPECTED_DEPS = {
    "landing/recordings": set(),
    "landing/patients": set(),
    "bronze/recordings": {"landing/recordings"},
    "silver/patients": {"landing/patients"},
    "silver/recordings_enriched": {"bronze/recordings", "silver/patients"},
    "silver/recordings_quarantine": {"bronze/recordings", "silver/patients"},
    "gold/daily_patient_avg": {"silver/recordings_enriched"},
    "gold/device_counts": {"bronze/recordings"},
    "gold/heartrate_5min": {"silver/recordings_enriched"},
    "landing/patient_changes": set(),
    "bronze/patient_changes": {"landing/patient_changes"},
    "silver/patients_current": {"bronze/patient_changes"},
    "silver/patients_history": {"bronze/patient_changes"},
    "landing/patient_snapshots": set(),
    "silver/patients_snapshot_history": {"landing/patient_snapshots"},
    "gold/patient_changes": {"silver/patients_current"},
}


def test_asset_keys_groups_and_lineage():
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert keys == set(EXPECTED_DEPS)
    for key, deps in EXPECTED_DEPS.items():
        node = graph.get(dg.AssetKey(key.split("/")))
        assert {p.to_user_string() for p in node.parent_keys} == deps, key
        assert node.group_name == key.split("/")[0]


def test_every_table_asset_is_a_spark_delta_asset_with_owner_and_description():
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        spec = graph.get(key)
        assert spec.owners, key
        assert spec.description, key
        if key.path[0] != "landing":
            assert {"spark", "delta"} <= set(spec.kinds), key
            assert spec.pools == {"spark"}, key


def test_silver_and_gold_are_automated_and_bronze_is_sensor_driven():
    graph = defs.resolve_asset_graph()
    automated = {k.to_user_string() for k in graph.get_all_asset_keys() if graph.get(k).automation_condition}
    assert automated == {
        "silver/patients", "silver/recordings_enriched", "silver/recordings_quarantine",
        "gold/daily_patient_avg", "gold/device_counts", "silver/patients_current", "silver/patients_history",
        "gold/heartrate_5min", "silver/patients_snapshot_history", "gold/patient_changes",
    }
    sensors = {s.name: s for s in defs.sensors or []}
    assert {"landing_recordings_sensor", "landing_patients_sensor", "landing_patient_changes_sensor",
            "lakehouse_automation_sensor"} <= set(sensors)
    assert all(s.default_status == dg.DefaultSensorStatus.RUNNING for s in sensors.values())


def test_runs_execute_in_process():
    assert defs.executor is dg.in_process_executor

