"""Reading a table for an invariant: its rows through the independent reader, or a violation
saying why they cannot be read; and offending rows quoted for a report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from lakehouse_assets.location import Location
from lakehouse_assets.reliability import table_reader
from lakehouse_assets.reliability.report import SAMPLE_SIZE, InvariantResult
from lakehouse_assets.settings import LakehouseSettings


def table_path(settings: LakehouseSettings, name: str) -> Location:
    """The folder of table ``layer.name``, on a local disk or an object store."""
    layer, table = name.split(".", 1)
    return settings.table_path(layer, table)


def read_or_report(result: InvariantResult, settings: LakehouseSettings, name: str,
                   columns: list[str] | None) -> Any:
    """The rows of table ``name`` (``layer.name``), or None after recording why they cannot
    be read."""
    path = table_path(settings, name)
    try:
        return table_reader.read_rows(path, columns)
    except Exception as exc:  # noqa: BLE001 - a damaged table is a finding, not a crash
        result.add(name, f"cannot read the table at {path}: {table_reader.error_summary(exc)}")
        return None


def quote(columns: Iterable[str], rows: Counter[tuple[Any, ...]]) -> list[str]:
    """A few of ``rows`` as ``{column: value}`` text, each with how many times it counts."""
    names = list(columns)
    return [f"{dict(zip(names, row, strict=True))}" + (f" x{n}" if n > 1 else "")
            for row, n in list(rows.items())[:SAMPLE_SIZE]]
