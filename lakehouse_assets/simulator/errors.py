"""Errors the simulator raises on purpose; all descend from the project's one error root."""

from __future__ import annotations

from lakehouse_assets.errors import LakehouseError


class LandingError(LakehouseError):
    """Landing files into a landing folder failed or was refused."""


class DatasetExhaustedError(LandingError):
    """More files were asked for than the year is split into."""

    def __init__(self, *, next_index: int, requested: int, files_per_year: int) -> None:
        super().__init__(
            f"The data set has {files_per_year} files (one per slice of the year) and the next "
            f"file is number {next_index}, so {requested} more cannot be landed. Land fewer files, "
            "start a new landing folder, or raise files_per_year for a new data set."
        )
        self.next_index = next_index
        self.files_per_year = files_per_year


class LandingStateError(LandingError):
    """The landing folder holds a different data set than the one asked for."""
