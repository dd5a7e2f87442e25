"""Grouped tables kept incrementally: each batch's partial results merged into the groups it
changes, instead of the whole aggregation recomputed or held in Spark's state store."""

from lakehouse_assets.aggregates.sink import AggregateSink, AggregateTable
from lakehouse_assets.aggregates.spec import IncrementalAggregate, Measure

__all__ = ["AggregateSink", "AggregateTable", "IncrementalAggregate", "Measure"]
