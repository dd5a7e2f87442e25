"""AUTO CDC worked out independently, in plain Python, from every change ever seen: what a
type 1 and a type 2 table must hold whatever order the changes arrived in."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Change = dict[str, Any]  # mrn, name, city, op ("UPSERT" | "DELETE"), seq


def scd1(changes: Iterable[Change], columns: Sequence[str] = ("name", "city")) -> list[dict[str, Any]]:
    """One row per live key: the columns of its highest-sequence change, unless that deleted it."""
    last: dict[int, Change] = {}
    for change in changes:
        if change["mrn"] not in last or change["seq"] > last[change["mrn"]]["seq"]:
            last[change["mrn"]] = change
    return sorted(({"mrn": c["mrn"], **{k: c[k] for k in columns}}
                   for c in last.values() if c["op"] != "DELETE"), key=lambda r: r["mrn"])


def scd2(changes: Iterable[Change], tracked: Sequence[str] = ("name", "city"),
         columns: Sequence[str] = ("name", "city")) -> list[dict[str, Any]]:
    """Every version of every key, in sequence order: an upsert that changes a tracked column
    opens a version (closing the current one at its sequence), one that changes only other
    columns updates the current version in place, a delete closes it."""
    by_key: dict[int, list[Change]] = {}
    for change in changes:
        by_key.setdefault(change["mrn"], []).append(change)
    rows: list[dict[str, Any]] = []
    for mrn, events in by_key.items():
        current: dict[str, Any] | None = None
        for event in sorted(events, key=lambda e: e["seq"]):
            if event["op"] == "DELETE":
                if current is not None:
                    current["__END_AT"] = event["seq"]
                current = None
            elif current is not None and all(current[c] == event[c] for c in tracked):
                current.update({k: event[k] for k in columns})
            else:
                if current is not None:
                    current["__END_AT"] = event["seq"]
                current = {"mrn": mrn, **{k: event[k] for k in columns},
                           "__START_AT": event["seq"], "__END_AT": None}
                rows.append(current)
    return sorted(rows, key=lambda r: (r["mrn"], r["__START_AT"]))
