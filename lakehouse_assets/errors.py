"""One error root for the project. Messages name what failed and what to do next."""

from __future__ import annotations


class LakehouseError(Exception):
    """Base of every error lakehouse_assets raises on purpose."""


class ConfigurationError(LakehouseError):
    """A setting is missing or malformed."""


class TableNotFoundError(LakehouseError):
    """A Delta table was read before anything wrote it."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"No Delta table at {path}: nothing has been written there yet. "
            "Materialize the asset that writes this table first, or check LAKEHOUSE_ROOT."
        )
        self.path = path


class NotADeltaTableError(LakehouseError):
    """A write targeted a non-empty folder that has no Delta log."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path} is not empty and is not a Delta table (it has no _delta_log folder). "
            "Refusing to write there: move its files away or choose another table path."
        )
        self.path = path


class SchemaMismatchError(LakehouseError):
    """A batch's schema cannot be written into a table."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"Schema mismatch writing {path}: {message}")
        self.path = path


class UnsupportedTableError(LakehouseError):
    """The table uses Delta features this engine cannot read correctly."""


class StreamSourceError(LakehouseError):
    """A Delta table cannot serve as a streaming source from the requested offsets."""
