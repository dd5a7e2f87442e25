"""Several append flows into one table (Lakeflow's ``@dp.append_flow``): each flow's query
run in turn, each with its own checkpoint under the table's (``<checkpoint>/flows/<flow>``),
all appending to the one table, each exactly once. The run reports the table once, from its
commits of every flow's batches."""

from __future__ import annotations

import dataclasses
from typing import Any

import dagster as dg

from lakehouse_assets.io.handlers.stream import write_stream
from lakehouse_assets.io.handlers.written import Written
from lakehouse_assets.io.table_run import TableRun
from lakehouse_assets.outputs import AppendFlows, ExpectedRows
from lakehouse_assets.settings import FLOWS_DIR
from lakehouse_assets.storage import DeltaTableStore


def write_flows(output: AppendFlows, run: TableRun, store: DeltaTableStore, log: Any) -> Written:
    """Run every flow's query into the table, one after another."""
    written: dict[str, Written] = {}
    for flow in output.flows:
        table = dataclasses.replace(run.table, checkpoint=run.table.checkpoint / FLOWS_DIR / flow.name)
        log.info(f"{run.table.table_name}: append flow {flow.name}")
        written[flow.name] = write_stream(ExpectedRows(flow.build(), output.expectations),
                                          dataclasses.replace(run, table=table), store, log)
    versions = [w.version for w in written.values() if w.version is not None]
    last = list(written.values())[-1]
    # Each flow's report reads the run's commits of the table, so the last one sums them all.
    return Written(max(versions) if versions else None, {
        **last.metadata,
        "flows": dg.MetadataValue.json({name: {"query_id": w.query.query_id if w.query else None,
                                               "version": w.version} for name, w in written.items()}),
    }, last.query)
