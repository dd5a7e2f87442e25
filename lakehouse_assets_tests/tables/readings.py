"""Tables whose last completed run read given tables, as a lakehouse run leaves them: a
Dagster run that materialized the table, and the table's commit naming that run and what it read."""

from __future__ import annotations

import json
from collections.abc import Mapping

import dagster as dg
import pyarrow as pa
from deltalake import CommitProperties, write_deltalake

from lakehouse_assets.settings import LakehouseSettings
from lakehouse_assets.storage.batch_record import READING_KEY, RUN_KEY, Reading, TableVersion


def record_reading(settings: LakehouseSettings, instance: dg.DagsterInstance, table: str,
                   read: Mapping[str, TableVersion], *, completed: bool = True) -> str:
    """Commit to ``table`` (``layer.name``) as a run that read ``read`` does, in a run of
    ``instance`` that materialized it (or, ``completed=False``, died before it could); the run's id."""
    key = dg.AssetKey(table.split("."))

    @dg.op(name=f"record_{table.replace('.', '__')}")
    def run_that_read(context):  # type: ignore[no-untyped-def]  # annotated, Dagster refuses a string
        if completed:
            yield dg.AssetMaterialization(key)
        yield dg.Output(context.run_id)

    @dg.job(name=f"read_{table.replace('.', '__')}")
    def reading_run() -> None:
        run_that_read()

    run_id = reading_run.execute_in_process(instance=instance).output_for_node(run_that_read.name)
    metadata = json.dumps({RUN_KEY: run_id, READING_KEY: Reading(dict(read)).to_json()})
    write_deltalake(str(settings.table_path(*table.split("."))), pa.table({"id": [1]}), mode="append",
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": metadata}))
    return str(run_id)
