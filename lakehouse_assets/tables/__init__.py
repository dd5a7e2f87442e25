"""The lakehouse's tables by name (``layer.name``): read, streamed and queried in SQL."""

from lakehouse_assets.tables.lakehouse_tables import LakehouseTables

__all__ = ["LakehouseTables"]
