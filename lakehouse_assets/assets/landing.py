"""External assets: the folders files land in. Nothing materializes them; sensors watch them."""

from __future__ import annotations

import dagster as dg

from lakehouse_assets.assets.table_asset import DEFAULT_OWNER

recordings = dg.AssetSpec(
    key=["landing", "recordings"],
    group_name="landing",
    description="Heart-rate recordings landing as JSON lines at $LAKEHOUSE_ROOT/landing/recordings/ "
    "(device_id, mrn, time in Unix seconds, heartrate).",
    kinds={"json", "files"},
    owners=[DEFAULT_OWNER],
)

patients = dg.AssetSpec(
    key=["landing", "patients"],
    group_name="landing",
    description="The patients lookup landing as CSV (mrn, name) at $LAKEHOUSE_ROOT/landing/patients/.",
    kinds={"csv", "files"},
    owners=[DEFAULT_OWNER],
)

patient_changes = dg.AssetSpec(
    key=["landing", "patient_changes"],
    group_name="landing",
    description="Changes to patient records landing as JSON lines at $LAKEHOUSE_ROOT/landing/patient_changes/ "
    "(mrn, name, op UPSERT or DELETE, seq ordering the changes); changes may arrive late, across files "
    "and within one.",
    kinds={"json", "files"},
    owners=[DEFAULT_OWNER],
)

patient_snapshots = dg.AssetSpec(
    key=["landing", "patient_snapshots"],
    group_name="landing",
    description="Full snapshots of the patients lookup landing as CSV (mrn, name) at "
    "$LAKEHOUSE_ROOT/landing/patient_snapshots/, one file per snapshot, in name order.",
    kinds={"csv", "files"},
    owners=[DEFAULT_OWNER],
)
