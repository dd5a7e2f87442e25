"""Change data capture: a feed of changes applied to SCD type 1 and type 2 tables (AUTO CDC)."""

from lakehouse_assets.cdc.sink import AutoCdcSink
from lakehouse_assets.cdc.spec import END_AT, START_AT, AutoCdc

__all__ = ["END_AT", "START_AT", "AutoCdc", "AutoCdcSink"]
