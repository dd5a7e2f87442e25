"""The benchmark suite: lakehouse_assets (embedded, and on a warm Spark Connect engine) against
hand-written Spark (cold, and warm in one long-lived session) and Spark Declarative Pipelines on
the same generated data. ``make bench`` / ``make bench-quick`` / ``make bench-engine``; see
run.py. ``make bench-engine-health`` (engine_health.py): one engine over many increments."""
