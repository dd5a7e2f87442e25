"""The benchmark suite: lakehouse_assets against hand-written Spark and Spark Declarative
Pipelines on the same generated data. ``make bench`` / ``make bench-quick``; see run.py."""
