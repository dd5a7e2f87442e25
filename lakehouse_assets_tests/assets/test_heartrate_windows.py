"""gold.heartrate_5min: per-device 5-minute windows with a 10-minute watermark, in append
mode, through the project's Definitions and real Spark: a window is written once, when the
watermark passes its end; a recording later than the watermark is counted, not silently lost."""

from __future__ import annotations

import datetime as dt
from statistics import mean

from lakehouse_assets_tests.assets.pipeline import delta_rows, materialization_metadata, materialize

SILVER_SCHEMA = "device_id BIGINT, mrn BIGINT, name STRING, time TIMESTAMP, heartrate DOUBLE"
T0 = dt.datetime(2020, 3, 1, 10, 0)


def _at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def _silver(spark, store, settings, rows) -> None:
    path = str(settings.table_path("silver", "recordings_enriched"))
    store.write(spark.createDataFrame([(d, 1, "Ada", _at(m), hr) for d, m, hr in rows], SILVER_SCHEMA), path,
                mode="append")


def _expected(rows, watermark_minutes: float) -> list[tuple]:
    """The windows a plain computation makes of ``rows``, those ended by the watermark."""
    windows: dict[tuple[int, dt.datetime], list[float]] = {}
    for device, minutes, heartrate in rows:
        windows.setdefault((device, _at(minutes // 5 * 5)), []).append(heartrate)
    return sorted((device, start, start + dt.timedelta(minutes=5), len(hrs), min(hrs), round(mean(hrs), 9), max(hrs))
                  for (device, start), hrs in windows.items()
                  if start + dt.timedelta(minutes=5) <= _at(watermark_minutes))


def _gold(settings) -> list[tuple]:
    columns = ["device_id", "window_start", "window_end", "recordings", "min_heartrate", "mean_heartrate",
               "max_heartrate"]
    return [(r[0], r[1].replace(tzinfo=None), r[2].replace(tzinfo=None), *r[3:])
            for r in delta_rows(settings, "gold", "heartrate_5min", columns)]


def _run() -> dict:
    return materialization_metadata(materialize("gold/heartrate_5min"))["gold/heartrate_5min"]


def test_windows_close_behind_the_watermark_and_late_rows_are_counted(spark, store, settings) -> None:
    first = [(1, 0.5, 60.0), (1, 3.0, 80.0), (1, 7.0, 90.0), (2, 1.0, 70.0), (1, 14.0, 100.0)]
    _silver(spark, store, settings, first)
    # The watermark is 10:04 after this batch: no window has ended before it yet.
    assert _run()["rows_dropped_by_watermark"] == 0
    assert _gold(settings) == []

    # 10:02 arrives late, but its window (to 10:05) is still open: it counts.
    second = [(1, 2.0, 200.0), (1, 31.0, 65.0), (2, 4.0, 75.0)]
    _silver(spark, store, settings, second)
    assert _run()["rows_dropped_by_watermark"] == 0
    assert _gold(settings) == _expected(first + second, watermark_minutes=21)  # each window written once

    # 10:03 now belongs to a window written already: dropped, and counted.
    third = [(1, 3.0, 500.0), (1, 45.0, 70.0)]
    _silver(spark, store, settings, third)
    assert _run()["rows_dropped_by_watermark"] == 1
    assert _gold(settings) == _expected(first + second + third[1:], watermark_minutes=35)
