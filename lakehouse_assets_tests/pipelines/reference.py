"""Running pipeline folders in tests as a user's lakehouse runs them: reference data landed and
settled, then what the landing sensors request, through Dagster."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest

import lakehouse_assets.assets
from lakehouse_assets.definitions import build_definitions
from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets_tests.built import BuiltLakehouse

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ENRICHED = ["device_id", "mrn", "name", "time", "heartrate"]


def settle(landing: Path) -> None:
    """Every landed file as landed a minute ago: settled, so a sensor's first tick announces it."""
    settled = time.time() - 60
    for path in landing.rglob("*"):
        os.utime(path, (settled, settled))


def run_landing_sensors(definitions: dg.Definitions, instance: dg.DagsterInstance,
                        sources: tuple[str, ...] = ("patients", "recordings", "patient_changes"),
                        ) -> list[dg.ExecuteInProcessResult]:
    """Each landing sensor's tick, and the run it requests, in the order of ``sources``
    (the reference's: patients first)."""
    repository = definitions.get_repository_def()
    results = []
    for source in sources:
        sensor = repository.get_sensor_def(f"landing_{source}_sensor")
        with dg.build_sensor_context(definitions=definitions, instance=instance,
                                     resources=dict(definitions.resources or {})) as context:
            tick = sensor.evaluate_tick(context)
        for request in tick.run_requests or []:
            results.append(dg.materialize(
                [*(definitions.assets or []), *(definitions.asset_checks or [])],
                selection=list(request.asset_selection or []), resources=dict(definitions.resources or {}),
                instance=instance, raise_on_error=True, tags=request.tags))
    return results


@contextmanager
def reference_run(built: BuiltLakehouse, *examples: Path) -> Iterator[tuple[LakehouseSettings, dg.Definitions, list]]:
    """The reference lakehouse (recordings with bad records, patient changes, the project's
    tables built), then what the landing sensors request with the pipeline folders
    ``examples`` loaded beside the project's own tables: the settings, the definitions and the
    runs' results. The project's tables have nothing new in those runs; the pipelines' are built."""
    with pytest.MonkeyPatch.context() as patch:
        settings = built.restore()
        patch.setenv("LAKEHOUSE_ROOT", str(settings.root))
        settle(Path(settings.root) / "landing")
        definitions = build_definitions(lakehouse_assets.assets, settings=settings, pipelines=list(examples))
        yield settings, definitions, run_landing_sensors(definitions, dg.DagsterInstance.ephemeral())


def materialize_all(definitions: dg.Definitions) -> dg.ExecuteInProcessResult:
    """Every asset of ``definitions``, as "Materialize all" runs them."""
    return dg.materialize([*(definitions.assets or [])], selection="*", resources=dict(definitions.resources or {}),
                          instance=dg.DagsterInstance.ephemeral(), raise_on_error=True)


def asset_specs(definitions: dg.Definitions) -> dict[str, dg.AssetSpec]:
    """The specs of the table assets of ``definitions``, by key (``schema/name``)."""
    return {spec.key.to_user_string(): spec for asset in definitions.assets or []
            if isinstance(asset, dg.AssetsDefinition) for spec in asset.specs}
