"""The crash harness's child: one materialization of the seeds' pipeline (or of the
assets named on its command line, without their checks after ``--without-checks``, or one
run of the job ``job:<name>``), then exit.

Run as ``python -m lakehouse_assets_tests.reliability.crash_child [--without-checks] [layer/name ... | job:<name>]`` with ``LAKEHOUSE_ROOT``
(and optionally ``LAKEHOUSE_FAULT``) set. The harness starts it as the leader of its own
process group, so a fault point's SIGKILL, or the harness's, takes Spark's JVM down with it.
Exit 0 when the run succeeded, 1 when it failed (the traceback is on stderr).
"""

from __future__ import annotations

import sys
import traceback

WITHOUT_CHECKS = "--without-checks"


def main() -> int:
    # Imported here so a failed import is reported like any other failure of the run.
    from lakehouse_assets_tests.assets.pipeline import SEED_PIPELINE, SEED_TABLES, materialize, run_job, tables

    args = sys.argv[1:]
    checks = WITHOUT_CHECKS not in args
    args = [arg for arg in args if arg != WITHOUT_CHECKS]
    try:
        if args and args[0].startswith("job:"):
            run_job(args[0].removeprefix("job:"))
        else:
            materialize((args or SEED_PIPELINE) if checks else tables(*(args or SEED_TABLES)))
    except Exception:  # noqa: BLE001 - the harness reads the traceback; the exit code says failed
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
