"""AUTO CDC tables: a change feed applied to an SCD type 1 or 2 table, as Lakeflow's
``create_auto_cdc_flow`` does. The asset body returns the feed (a streaming DataFrame); the
IO manager applies each micro-batch of it (:class:`~lakehouse_assets.cdc.AutoCdcSink`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import dagster as dg

from lakehouse_assets.assets.table_asset import StreamInput, table_asset
from lakehouse_assets.cdc import END_AT, START_AT, AutoCdc
from lakehouse_assets.cdc.snapshots import snapshot_spec


def auto_cdc_table(
    *,
    layer: str,
    keys: Sequence[str],
    sequence_by: str,
    stored_as_scd_type: Literal[1, 2] = 1,
    apply_as_deletes: str | None = None,
    apply_as_truncates: str | None = None,
    except_column_list: Sequence[str] = (),
    track_history_column_list: Sequence[str] | None = None,
    column_list: Sequence[str] | None = None,
    track_history_except_column_list: Sequence[str] | None = None,
    name: str | None = None,
    description: str | None = None,
    ins: Mapping[str, dg.AssetIn | StreamInput] | None = None,
    **table_options: Any,
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """Decorate a function returning a change feed (a streaming DataFrame) as the SCD table
    ``layer.name`` that the feed keeps, with Lakeflow's arguments: ``keys``,
    ``sequence_by``, ``apply_as_deletes`` / ``apply_as_truncates`` (SQL conditions on a
    change row), ``column_list`` or ``except_column_list``, ``stored_as_scd_type`` and, for
    type 2, ``track_history_column_list`` or ``track_history_except_column_list``. Type 2
    tables add ``__START_AT`` and ``__END_AT``.
    Other keyword arguments go to :func:`~lakehouse_assets.assets.table_asset.table_asset`.
    """
    spec = AutoCdc(keys=keys, sequence_by=sequence_by, stored_as_scd_type=stored_as_scd_type,
                   apply_as_deletes=apply_as_deletes, apply_as_truncates=apply_as_truncates,
                   except_column_list=except_column_list, track_history_column_list=track_history_column_list,
                   column_list=column_list, track_history_except_column_list=track_history_except_column_list)
    history = f", {START_AT} and {END_AT} opening and closing each version" if stored_as_scd_type == 2 else ""
    metadata = {
        "auto_cdc": f"SCD type {stored_as_scd_type} by {', '.join(keys)}, ordered by {sequence_by}{history}",
        **table_options.pop("metadata", {}),
    }
    return table_asset(layer=layer, name=name, description=description, ins=ins, output_mode="update",
                       merge_keys=spec.row_identity, auto_cdc=spec, metadata=metadata, **table_options)


def auto_cdc_from_snapshot_table(
    *,
    layer: str,
    keys: Sequence[str],
    stored_as_scd_type: Literal[1, 2] = 1,
    track_history_column_list: Sequence[str] | None = None,
    name: str | None = None,
    description: str | None = None,
    **table_options: Any,
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """Decorate a function returning the snapshots of a source
    (:class:`~lakehouse_assets.cdc.snapshots.SnapshotSource`) as the SCD table ``layer.name``
    they keep, as Lakeflow's ``create_auto_cdc_from_snapshot_flow``: each new snapshot is
    compared with the one before, and what changed (new or changed keys, keys gone) is applied
    at the snapshot's version (type 2: ``__START_AT`` and ``__END_AT`` are snapshot versions)."""
    spec = snapshot_spec(keys, stored_as_scd_type, track_history_column_list)
    history = f", {START_AT} and {END_AT} the snapshot versions opening and closing each version" \
        if stored_as_scd_type == 2 else ""
    metadata = {
        "auto_cdc": f"SCD type {stored_as_scd_type} by {', '.join(keys)}, FROM SNAPSHOT{history}",
        **table_options.pop("metadata", {}),
    }
    return table_asset(layer=layer, name=name, description=description, merge_keys=spec.row_identity,
                       auto_cdc=spec, metadata=metadata, **table_options)

