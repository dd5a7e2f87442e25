"""What a landing sensor's look costs as files pile up, on a local disk and on an S3-API store.

    python -m benchmarks.landing_listing      # make bench-landing

The landing sensor lists its folder on every tick (:func:`~lakehouse_assets.sensors.landing.scan_landing`)
and compares it with the files it already announced: on a store, one ListObjectsV2 stream of
pages of 1,000 keys. For each place (a temporary folder; a bucket of s3proxy, the tests'
S3-API server, started on loopback) and each count of files already landed (``--counts``),
this times the look that finds them all (a burst: its time per file found), then lands one new
file and times the look that finds it, ``--repeats`` times (the median is reported). Issue 48
asks the listing's cost per file found to hold flat to 10,000 files (at most twice that at 100):
a burst measures that. A look that finds one file lists them all: its time grows with N. Writes ``benchmarks/results/landing_listing.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lakehouse_assets.location import Location, locate
from lakehouse_assets.sensors.landing import LandingCursor, scan_landing

RESULTS = Path(__file__).parent / "results"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", type=int, nargs="+", default=[100, 1000, 10000],
                        help="files already landed before each timed look (default 100 1000 10000)")
    parser.add_argument("--repeats", type=int, default=7, help="looks timed per count (default 7)")
    parser.add_argument("--no-store", action="store_true", help="the local disk only")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    doc: dict[str, Any] = {"measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                           "repeats": args.repeats, "places": {}}
    with tempfile.TemporaryDirectory(prefix="landing_listing_") as folder:
        root = Path(folder)
        doc["places"]["local disk"] = measure(lambda n: str(root / "disk" / f"landing{n}"), args)
        if not args.no_store:
            from lakehouse_assets_tests.s3_server import s3_server

            with s3_server(root / "s3" / "data") as server:
                os.environ.update(server.environment())
                bucket = server.bucket("lake")
                doc["places"]["S3-API store (s3proxy 4.1.0)"] = measure(lambda n: f"s3a://{bucket}/landing{n}", args)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "landing_listing.json").write_text(json.dumps(doc, indent=1))
    (RESULTS / "landing_listing.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


def measure(folder_of: Callable[[int], str], args: argparse.Namespace) -> dict[str, Any]:
    """For each count N, in a fresh folder: the look that finds N files landed at once (a
    burst: its time per file found), then the looks that each find one new file among them."""
    found: dict[str, Any] = {}
    for count in args.counts:
        folder = locate(folder_of(count))
        land(folder, [f"{i:06d}.json" for i in range(count)])
        later = time.time() + 3600  # every file settled
        started = time.perf_counter()
        burst = scan_landing(folder, LandingCursor({}, {}), now=later)
        burst_seconds = time.perf_counter() - started
        if len(burst.ready) != count:
            raise RuntimeError(f"the look found {len(burst.ready)} of {count} files landed")
        cursor, seconds = burst.cursor, []
        for repeat in range(args.repeats):
            land(folder, [f"new-{repeat:03d}.json"])
            started = time.perf_counter()
            scan = scan_landing(folder, cursor, now=later)
            seconds.append(time.perf_counter() - started)
            if scan.ready != [f"new-{repeat:03d}.json"]:
                raise RuntimeError(f"the look among {count} files found {scan.ready[:5]}, not the one new file")
            cursor = scan.cursor
        found[str(count)] = {"burst_seconds": burst_seconds, "burst_ms_per_file": burst_seconds * 1000 / count,
                             "one_new_median_seconds": statistics.median(seconds), "one_new_min_seconds": min(seconds)}
    return found


def land(folder: Location, names: Sequence[str]) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda name: (folder / name).write_text('{"id": 1}\n'), names))


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"# A landing sensor's look as files pile up (measured {doc['measured_at']})", "",
             "- **Burst**: one look finds N files landed at once; its time per file found.",
             f"- **One new among N**: the median of {doc['repeats']} looks, each finding the one file "
             "landed since the last look.",
             "- Ratios are to the fewest files measured.", "",
             "| place | files landed (N) | burst: per file | ratio | one new among N | ratio |",
             "|---|---|---|---|---|---|"]
    for place, counts in doc["places"].items():
        first = next(iter(counts.values()))
        for count, figures in counts.items():
            lines.append(
                f"| {place} | {int(count):,} | {figures['burst_ms_per_file']:.3f} ms | "
                f"{figures['burst_ms_per_file'] / first['burst_ms_per_file']:.1f}× | "
                f"{figures['one_new_median_seconds'] * 1000:.1f} ms | "
                f"{figures['one_new_median_seconds'] / first['one_new_median_seconds']:.1f}× |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
