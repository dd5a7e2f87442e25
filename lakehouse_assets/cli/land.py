"""The commands that bring data in: ``land`` lands the next files of the reference data set, once or
continuously (the simulator does the work; the command picks demo-friendly defaults, shows progress,
says what landed), and ``copy-into`` is the course's ``COPY INTO``, over
:func:`lakehouse_assets.ingestion.copy_into`."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from lakehouse_assets.cli.arguments import TableName, add_command, non_negative_int, positive_int, rate, seconds
from lakehouse_assets.cli.catalog import require_root
from lakehouse_assets.cli.errors import EXIT_OK, CommandError, UsageError
from lakehouse_assets.cli.output import format_count, print_json
from lakehouse_assets.location import Location
from lakehouse_assets.settings import LANDING_DIR

if TYPE_CHECKING:
    from lakehouse_assets.resource import LakehouseResource
    from lakehouse_assets.simulator import DatasetExhaustedError, LandingResult, PatientChangesResult

DEFAULT_FILES = 5
DEFAULT_RECORDS = 1_000
DEFAULT_BAD_RATE = 0.01
#: One file per day of 2020 (almost): a few files already give the gold daily averages
#: several days, and the year lasts a whole demo.
DEFAULT_FILES_PER_YEAR = 365
DEFAULT_INTERVAL_SECONDS = 5.0
#: Landing more files than this on a terminal shows a progress bar.
PROGRESS_MIN_FILES = 10
# Files per land() call when showing progress: small enough for a smooth bar, large enough
# that the simulator still overlaps the files' fsyncs.
_MAX_FILES_PER_CALL = 32

LAND = f"""\
Land the next recordings files of the reference data set (heart-rate recordings over 2020)
into $LAKEHOUSE_ROOT/{LANDING_DIR}/recordings/, and the patients CSV into
$LAKEHOUSE_ROOT/{LANDING_DIR}/patients/ if it is missing. Numbering continues after the files
landed before; the same seed always gives the same files. A share of the records is bad on
purpose (--bad-rate), exactly counted per kind: malformed JSON, wrong types, non-positive
heart rates, unknown patients.

With --changes N, also land N files of changes to the patients' records (a change-data feed:
mrn, name, op UPSERT or DELETE, seq) into $LAKEHOUSE_ROOT/{LANDING_DIR}/patient_changes/, after
the recordings (with --continuous: before the first one). Some changes arrive late, in a later
file than their seq belongs to, and each file's lines are shuffled.

With --continuous, land one file now and one more every --interval seconds until Ctrl-C or
SIGTERM (the file being written is finished first), --files have landed, or the year is
complete; then print a summary.

--seed and --files-per-year identify the data set: a landing folder holds one. When they
are not given, the data set already in the folder is continued.
"""

COPY_INTO = """\
Load the files under PATH into TABLE (layer.name), like COPY INTO: each file once. Files the
table loaded before are skipped unless --force; the table is created by the first load.
Runs Spark (embedded, or the engine at LAKEHOUSE_SPARK_REMOTE).

example:
  lakehouse copy-into bronze.patients_copy --from lakehouse_data/landing/patients \\
      --format csv --option header=true --option inferSchema=true
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``land`` and ``copy-into``."""
    parser = add_command(subparsers, "land", parents, run_land, "land the next files of the reference data set",
                         LAND, json=True)
    parser.add_argument("--files", type=positive_int, metavar="N",
                        help=f"how many files to land (default {DEFAULT_FILES}; "
                             "with --continuous: no limit)")
    parser.add_argument("--records", type=positive_int, default=DEFAULT_RECORDS, metavar="R",
                        help=f"records per file (default {DEFAULT_RECORDS})")
    parser.add_argument("--bad-rate", type=rate, default=DEFAULT_BAD_RATE, metavar="P",
                        help=f"share of bad records, 0 to 1 (default {DEFAULT_BAD_RATE})")
    parser.add_argument("--seed", type=non_negative_int, metavar="S",
                        help="seed of the data set (default: the folder's, else 0)")
    parser.add_argument("--files-per-year", type=positive_int, metavar="F",
                        help="files the year is cut into (default: the folder's, else "
                             f"{DEFAULT_FILES_PER_YEAR}, one per day)")
    parser.add_argument("--changes", type=non_negative_int, default=0, metavar="N",
                        help="also land N files of patient record changes (default 0)")
    parser.add_argument("--continuous", action="store_true",
                        help="keep landing one file every --interval seconds until stopped")
    parser.add_argument("--interval", type=seconds, default=DEFAULT_INTERVAL_SECONDS,
                        metavar="SECONDS",
                        help="with --continuous: seconds between files "
                             f"(default {DEFAULT_INTERVAL_SECONDS:g})")
    parser.add_argument("--if-empty", action="store_true",
                        help="land only if no recordings file has landed yet (a first batch, as make run lands)")
    copy = add_command(subparsers, "copy-into", parents, run_copy_into, "load files into a table once each (COPY INTO)",
                       COPY_INTO, spark=True, table="TABLE", json=True)
    copy.add_argument("--from", dest="source", metavar="PATH", type=Path, required=True,
                      help="the folder of files to load (and its subfolders)")
    copy.add_argument("--format", required=True, choices=("csv", "json", "parquet"),
                      help="the files' format (COPY INTO's FILEFORMAT)")
    copy.add_argument("--pattern", metavar="GLOB",
                      help="load only files whose path under PATH matches, e.g. '2024-*/*.csv'")
    copy.add_argument("--option", dest="options", metavar="KEY=VALUE", action="append", default=[],
                      type=_reader_option, help="a Spark reader option (FORMAT_OPTIONS); repeatable")
    copy.add_argument("--force", action="store_true", help="load matching files again, even if loaded before")
    copy.add_argument("--merge-schema", action="store_true",
                      help="let the files add columns to the table (COPY_OPTIONS mergeSchema)")


def run_land(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Land the files and print what landed."""
    from lakehouse_assets.simulator import (
        DatasetIdentity,
        LandingStateError,
        SimulatorConfig,
        next_file_index,
        read_manifest,
    )

    landing_root = lakehouse.settings().root / LANDING_DIR  # a local folder or a prefix on object storage
    if args.if_empty and next_file_index(landing_root) > 1:
        print(f"Files have landed in {landing_root} already: nothing landed (--if-empty).")
        return EXIT_OK
    manifest = read_manifest(landing_root)
    # Continue the folder's data set unless told otherwise; a mismatch is refused by the lander.
    dataset = dataclasses.asdict(manifest.dataset if manifest else
                                 DatasetIdentity.of(SimulatorConfig(files_per_year=DEFAULT_FILES_PER_YEAR)))
    for given in ("seed", "files_per_year"):
        if getattr(args, given) is not None:
            dataset[given] = getattr(args, given)
    options = dict(records_per_file=args.records, bad_rate=args.bad_rate, **dataset)
    try:
        if args.continuous:
            # A continuous landing ends only when stopped: land the changes before it starts.
            changes = _land_changes(landing_root, args.changes, dataset)
            landed, stopped_by = _land_continuously(landing_root, args, options)
        else:
            # After the recordings, which refuse a full year before landing anything.
            landed, stopped_by = _land_once(landing_root, args.files or DEFAULT_FILES, options), None
            changes = _land_changes(landing_root, args.changes, dataset)
    except LandingStateError as exc:
        raise CommandError(
            f"{exc} To continue the data set in {landing_root}, leave out --seed and "
            "--files-per-year; for another data set, use another --root.") from exc
    _report(landed, changes, landing_root, dataset["files_per_year"], stopped_by, as_json=args.json)
    return EXIT_OK


def run_copy_into(args: argparse.Namespace, lakehouse: LakehouseResource) -> int:
    """Load the new files; print what was loaded and skipped."""
    from lakehouse_assets.ingestion import copy_into

    settings = lakehouse.settings()
    table: TableName = args.table
    require_root(settings)
    source: Path = args.source
    if not source.is_dir():
        raise UsageError(f"Cannot copy into {table} from {source}: it is not a folder. Pass --from the folder "
                         "that holds the files.")
    result = copy_into(
        lakehouse.spark_session, table_path=settings.table_path(table.layer, table.name), source=source.resolve(),
        format=args.format, pattern=args.pattern, force=args.force, merge_schema=args.merge_schema,
        format_options=dict(args.options), store=lakehouse.store(),
    )
    if args.json:
        print_json({"table": str(table), "loaded": list(result.loaded), "skipped": list(result.skipped),
                    "rows_written": result.rows_written, "version": result.version, "load_id": result.load_id})
        return EXIT_OK
    version = f" as version {result.version}" if result.version is not None else ""
    print(f"{table}: loaded {len(result.loaded)} file(s), {result.rows_written} row(s){version}; "
          f"skipped {len(result.skipped)} file(s) loaded before")
    for path in result.loaded:
        print(f"  loaded   {path}")
    return EXIT_OK


def _reader_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"invalid --option {text!r}: give KEY=VALUE, e.g. header=true")
    return key, value


def _land_once(landing_root: Location, files: int, options: dict[str, Any]) -> LandingResult:
    from lakehouse_assets.simulator import DatasetExhaustedError, LandingResult, land, next_file_index

    first = next_file_index(landing_root)
    if first + files - 1 > options["files_per_year"]:
        # Checked before landing anything: landing in several calls must not land half.
        _raise_exhausted(DatasetExhaustedError(
            next_index=first, requested=files, files_per_year=options["files_per_year"]))
    show_progress = files > PROGRESS_MIN_FILES and sys.stderr.isatty()
    per_call = min(_MAX_FILES_PER_CALL, max(1, files // 50)) if show_progress else files
    results = []
    with _progress(files, enabled=show_progress) as advance:
        left = files
        while left:
            try:
                result = land(landing_root, files=min(per_call, left), **options)
            except DatasetExhaustedError as exc:  # another lander got there first
                _raise_exhausted(exc)
            results.append(result)
            left -= len(result.files)
            advance(len(result.files))
    return LandingResult(
        landing_root=results[0].landing_root, patients_path=results[0].patients_path,
        patients_written=any(r.patients_written for r in results),
        files=tuple(f for r in results for f in r.files))


def _land_changes(landing_root: Location, files: int, dataset: dict[str, Any]) -> PatientChangesResult | None:
    """Land ``files`` files of patient changes naming the data set's patients (None if none)."""
    if not files:
        return None
    from lakehouse_assets.simulator import land_patient_changes

    return land_patient_changes(landing_root, files=files, seed=dataset["seed"],
                                patient_count=dataset["patient_count"],
                                device_count=dataset["device_count"])


def _land_continuously(landing_root: Location, args: argparse.Namespace,
                       options: dict[str, Any]) -> tuple[LandingResult, str]:
    from lakehouse_assets.simulator import LandedFile, land_continuously

    stop = threading.Event()
    received: list[str] = []

    def on_landed(landed: LandedFile) -> None:
        if not args.json:
            print(f"{landed.path.name}  {format_count(landed.counts.total)} records "
                  f"({format_count(landed.counts.bad)} bad)", flush=True)

    limit = f"up to {args.files} files, " if args.files else ""
    print(f"Landing {limit}one file every {args.interval:g}s into {landing_root / 'recordings'}; "
          "Ctrl-C or SIGTERM stops after the current file.", file=sys.stderr, flush=True)
    with _stop_on_signals(stop, received):
        result = land_continuously(landing_root, interval_seconds=args.interval, stop_event=stop,
                                   max_files=args.files, on_landed=on_landed, **options)
    if received:
        return result, received[0]
    if args.files and len(result.files) >= args.files:
        return result, "limit"
    return result, "complete"


@contextmanager
def _stop_on_signals(stop: threading.Event, received: list[str]) -> Iterator[None]:
    """Turn SIGINT and SIGTERM into a request to stop after the current file; a second
    Ctrl-C interrupts at once (files appear atomically, so that is safe too)."""

    def handle(signum: int, frame: FrameType | None) -> None:
        # Only set flags here: printing from a signal handler can collide with a print in
        # progress on the same stream.
        received.append(signal.Signals(signum).name)
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def _progress(total: int, *, enabled: bool) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr, or nothing when ``enabled`` is false."""
    if not enabled:
        yield lambda count: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("Landing"), BarColumn(), MofNCompleteColumn(), TextColumn("files"),
               TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("land", total=total)
        yield lambda count: progress.advance(task, count)


def _raise_exhausted(exc: DatasetExhaustedError) -> NoReturn:
    left = max(0, exc.files_per_year - exc.next_index + 1)
    hint = (f" {left} files are left: lakehouse land --files {left}" if left
            else " All files have landed: use a new --root for a new landing.")
    raise CommandError(f"{exc}{hint}") from exc


def _report(result: LandingResult, changes: PatientChangesResult | None, landing_root: Location,
            files_per_year: int, stopped_by: str | None, *, as_json: bool) -> None:
    from lakehouse_assets.simulator import BAD_KINDS, next_file_index

    files, counts = result.files, result.counts
    next_index = next_file_index(landing_root)
    if as_json:
        changes_report = {} if changes is None else {"patient_changes": {
            "dir": str(changes.folder), "files": [str(path) for path in changes.paths],
            "counts": {"upsert": changes.upserts, "delete": changes.deletes, "total": changes.changes},
        }}
        print_json({
            "landing_root": str(landing_root),
            "recordings_dir": str(landing_root / "recordings"),
            "patients_csv": str(result.patients_path),
            "patients_written": result.patients_written,
            "files": [{"index": f.index, "path": str(f.path), "start_time": _utc(f.start_time),
                       "end_time": _utc(f.end_time), "counts": f.counts.as_dict()} for f in files],
            "counts": {**counts.as_dict(), "bad": counts.bad},
            "next_index": next_index,
            "files_per_year": files_per_year,
            "stopped_by": stopped_by,
            **changes_report,
        })
        return
    if stopped_by in ("SIGINT", "SIGTERM"):
        print(f"Stopped by {stopped_by}.")
    elif stopped_by == "complete":
        print(f"The data set is complete: all {files_per_year} files have landed.")
    if not files:
        print("Landed no files.")
    else:
        names = files[0].path.name if len(files) == 1 else f"{files[0].path.name} .. {files[-1].path.name}"
        print(f"Landed {len(files)} file{'s' if len(files) != 1 else ''} into "
              f"{landing_root / 'recordings'}: {names}")
        print(f"  covering {_utc(files[0].start_time):%Y-%m-%d %H:%M} to "
              f"{_utc(files[-1].end_time):%Y-%m-%d %H:%M} UTC")
        bad = ", ".join(f"{kind.value} {format_count(counts.of(kind))}" for kind in BAD_KINDS)
        print(f"  records: {format_count(counts.total)} ({format_count(counts.good)} good, "
              f"{format_count(counts.bad)} bad: {bad})")
    if result.patients_written:
        print(f"  wrote the patients CSV: {result.patients_path}")
    if next_index <= files_per_year:
        print(f"  next file: number {next_index} of {files_per_year}")
    if changes is not None:
        paths = changes.paths
        names = paths[0].name if len(paths) == 1 else f"{paths[0].name} .. {paths[-1].name}"
        print(f"Landed {len(paths)} file{'s' if len(paths) != 1 else ''} of patient changes into "
              f"{changes.folder}: {names}")
        print(f"  changes: {format_count(changes.changes)} ({format_count(changes.upserts)} upserts, "
              f"{format_count(changes.deletes)} deletes)")


def _utc(seconds_since_epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds_since_epoch, tz=dt.UTC)
