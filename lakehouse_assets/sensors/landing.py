"""A sensor per landing folder: new or re-landed files request a run of the table that ingests them.

The sensor only decides *when* to run; which files a run ingests is the ingestion query's
checkpoint's business. So a missed tick only delays, and an extra run finds nothing to do.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.assets.landing import companion_readers, downstream_tables, landing_readers
from lakehouse_assets.ingestion.files import is_data_file
from lakehouse_assets.location import Location

# A file younger than this, whose size we have not seen hold still, may still be written.
SETTLE_SECONDS = 2.0
# How many file names a run's tags list (the count is always there).
TAGGED_FILE_NAMES = 20

TAG_FILE_COUNT = "lakehouse/trigger_file_count"
TAG_FILES = "lakehouse/trigger_files"
TAG_SOURCE = "lakehouse/landing_source"
#: The lookups (read from other landing folders) a run builds along, never built before.
TAG_BUILT_ALONG = "lakehouse/built_along"


@dataclass(frozen=True)
class FileState:
    """What a look at one file saw."""

    size: int
    mtime_ns: int

    def encode(self) -> str:
        return f"{self.size}:{self.mtime_ns}"

    @classmethod
    def decode(cls, text: str) -> FileState:
        size, mtime = text.split(":")
        return cls(int(size), int(mtime))


@dataclass(frozen=True)
class LandingCursor:
    """Files already announced, and files seen once but not yet settled."""

    announced: Mapping[str, FileState]
    pending: Mapping[str, FileState]

    @classmethod
    def parse(cls, text: str | None) -> LandingCursor:
        data = json.loads(text) if text else {}
        announced, pending = ({k: FileState.decode(v) for k, v in data.get(part, {}).items()} for part in _PARTS)
        return cls(announced, pending)

    def serialize(self) -> str:
        return json.dumps({part: {k: v.encode() for k, v in sorted(getattr(self, part).items())} for part in _PARTS},
                          separators=(",", ":"))


_PARTS = ("announced", "pending")


@dataclass(frozen=True)
class LandingScan:
    """The outcome of one look at a landing folder."""

    ready: list[str]
    waiting: list[str]
    cursor: LandingCursor


def scan_landing(folder: Location, cursor: LandingCursor, *, now: float | None = None) -> LandingScan:
    """Compare the folder with the cursor: which files are new (or changed) and settled,
    which are new but may still be growing."""
    now = time.time() if now is None else now
    announced = dict(cursor.announced)
    pending: dict[str, FileState] = {}
    ready: list[str] = []
    waiting: list[str] = []
    for name, state in landed_files(folder):
        if announced.get(name) == state:
            continue
        settled = cursor.pending.get(name) == state or now - state.mtime_ns / 1e9 >= SETTLE_SECONDS
        if settled:
            ready.append(name)
            announced[name] = state
        else:
            waiting.append(name)
            pending[name] = state
    return LandingScan(sorted(ready), sorted(waiting), LandingCursor(announced, pending))


def landed_files(folder: Location) -> Iterator[tuple[str, FileState]]:
    """The data files under ``folder`` (at any depth; none in hidden or temporary folders), by
    their path below it: one listing of the folder, on a disk or an object store."""
    for stored in folder.files(recursive=True):
        if all(is_data_file(part) for part in stored.relative_path.split("/")):
            yield stored.relative_path, FileState(stored.size, stored.mtime_ns)


@dataclass(frozen=True)
class Companion:
    """Tables reading another landing folder that a run of this folder's readers needs too (a
    lookup the tables below them join): built along, with ``selection`` (them and everything
    below), when their folder holds files and one of them was never built."""

    source: str
    readers: tuple[dg.AssetKey, ...]
    selection: frozenset[dg.AssetKey]


def landing_sensors(assets: Iterable[Any], *, minimum_interval_seconds: int) -> list[dg.SensorDefinition]:
    """One :func:`landing_sensor` per landing folder the tables in ``assets`` read, each
    requesting the tables that read it (found from their dependencies on ``landing/<source>``)
    and, when they were never built, the lookups the tables below them join."""
    assets = list(assets)
    companions = companion_readers(assets)
    sensors = []
    for source, readers in sorted(landing_readers(assets).items()):
        sensors.append(landing_sensor(
            source=source, targets=readers, minimum_interval_seconds=minimum_interval_seconds,
            companions=[Companion(other, tuple(tables), frozenset(downstream_tables(assets, [*readers, *tables])))
                        for other, tables in sorted(companions.get(source, {}).items())],
            carried=frozenset(downstream_tables(assets, readers))))
    return sensors


def landing_sensor(
    *,
    source: str,
    targets: Sequence[dg.AssetKey],
    minimum_interval_seconds: int,
    companions: Sequence[Companion] = (),
    carried: Collection[dg.AssetKey] = (),
) -> dg.SensorDefinition:
    """A sensor on ``$LAKEHOUSE_ROOT/landing/<source>`` that requests one run per tick in
    which files arrived, tagged with the files that triggered it.

    The run materializes ``targets`` (the tables reading the folder) and every asset downstream
    of them (``carried`` names them all when there are ``companions``): new files
    reach gold in one run (one launch, one session) instead of a bronze run and a second one on
    the automation sensor's next tick. A lookup those tables join, read from another landing
    folder (a :class:`Companion`), is built in the same run while it was never built and its
    files have landed: a fresh lakehouse's first run reaches gold whichever folder's sensor
    ticks first. A blocking check that fails in the run stops the assets below it, as it
    would stop automation; a table below whose other upstream has not landed yet is skipped in
    the run, with its reason (:mod:`lakehouse_assets.assets.nothing_to_read`).
    """
    if companions and not carried:
        raise ValueError(f"landing_sensor({source!r}): with companions, name the tables its runs carry (carried)")
    selection: dg.AssetSelection = dg.AssetSelection.assets(*targets).downstream()
    for companion in companions:
        selection = selection | dg.AssetSelection.assets(*companion.selection)
    requested = ", ".join(target.to_user_string() for target in targets)

    @dg.sensor(
        name=f"landing_{source}_sensor",
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        asset_selection=selection,
        required_resource_keys={"lakehouse"},
        description=f"Requests {requested} and downstream "
        f"when files land in landing/{source}/",
    )
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        lakehouse = context.resources.lakehouse
        settings = lakehouse.settings()
        folder = settings.landing_path(source)
        cursor = LandingCursor.parse(context.cursor)
        scan = scan_landing(folder, cursor)
        if not scan.ready and not scan.waiting and not folder.is_dir():
            # The cursor is kept: files that come back unchanged are not announced again.
            return dg.SkipReason(
                f"The landing folder {folder} does not exist: nothing to ingest. Create it (or land "
                "files with `lakehouse land`); if it held files before, restore it."
            )
        if not scan.ready:
            if scan.cursor != cursor:
                context.update_cursor(scan.cursor.serialize())
            reason = (
                f"{len(scan.waiting)} file(s) in {folder} still being written"
                if scan.waiting
                else f"No new files in {folder}"
            )
            return dg.SkipReason(reason)
        announced = "\n".join(f"{n}={scan.cursor.announced[n].encode()}" for n in scan.ready)
        digest = hashlib.sha256(announced.encode()).hexdigest()
        shown = scan.ready[:TAGGED_FILE_NAMES]
        store = lakehouse.store()
        # The companions to build along: their folder holds files and a table of theirs was never built.
        along = [c for c in companions if any(True for _ in landed_files(settings.landing_path(c.source)))
                 and not all(store.exists(str(settings.table_path(*key.path))) for key in c.readers)]
        request = dg.RunRequest(
            run_key=f"{source}:{digest[:16]}",
            # With companions, the sensor's selection holds theirs too: name this run's own.
            asset_selection=sorted({*carried, *(k for c in along for k in c.selection)}) if companions else None,
            tags={
                TAG_SOURCE: source,
                TAG_FILE_COUNT: str(len(scan.ready)),
                TAG_FILES: ", ".join(shown)
                + (f" … and {len(scan.ready) - len(shown)} more" if len(scan.ready) > len(shown) else ""),
                **({TAG_BUILT_ALONG: ", ".join(k.to_user_string() for c in along for k in c.readers)} if along else {}),
            },
        )
        return dg.SensorResult(run_requests=[request], cursor=scan.cursor.serialize())

    return _sensor
