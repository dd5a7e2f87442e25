"""Errors raised by ingestion. Each names the folder, file, column or checkpoint involved and
says what to do next."""

from __future__ import annotations

from collections.abc import Sequence

from lakehouse_assets.errors import ConfigurationError, LakehouseError


class IngestionError(LakehouseError):
    """Base of the errors Auto Loader-style ingestion and COPY INTO raise on purpose."""


class IngestionOptionsError(ConfigurationError, IngestionError):
    """An ingestion option is unknown, malformed, or conflicts with another."""


class SchemaInferenceError(IngestionError):
    """No schema could be inferred for a source folder."""


class NothingToInferError(SchemaInferenceError):
    """The source folder holds no data file yet and no schema is stored."""

    def __init__(self, source: str, schema_location: str) -> None:
        super().__init__(
            f"Cannot infer a schema for {source}: it holds no data files yet and no schema is stored "
            f"at {schema_location}. Land at least one file there first (a run with nothing landed "
            "does nothing), or check that the folder is the right one."
        )


class LandingFolderMissingError(IngestionError):
    """The landing folder a stream reads is gone, though files were ingested from it before."""

    def __init__(self, source: str, schema_location: str) -> None:
        super().__init__(
            f"The landing folder {source} does not exist, but a schema inferred from its files is "
            f"stored at {schema_location}: it was moved, deleted or unmounted. Restore it (or create "
            f"it empty: mkdir -p {source}) and run again; nothing was read or lost."
        )


class StoredSchemaError(IngestionError):
    """The stored schema cannot be read, or no longer matches the options it was inferred with."""


class NewColumnsError(IngestionError):
    """Files hold columns the stored schema does not have, and the evolution mode stops the run."""

    def __init__(self, message: str, *, columns: Sequence[str], files: Sequence[str]) -> None:
        super().__init__(message)
        self.columns = list(columns)
        self.files = list(files)


class SchemaEvolvedError(NewColumnsError):
    """``addNewColumns``: new columns stopped the run, and the stored schema now has them.

    Run again (or set ``continue_on_new_columns``) and ingestion goes on with the new columns.
    """

    def __init__(
        self, *, columns: Sequence[str], files: Sequence[str], schema_location: str, schema_version: int
    ) -> None:
        super().__init__(
            f"New columns {list(columns)} appeared in {_some(files)}. The stored schema at "
            f"{schema_location} now has them (version {schema_version}); run the ingestion again "
            "to load these files with the new columns, or set continue_on_new_columns=True to go on "
            "within the same run.",
            columns=columns,
            files=files,
        )


class UnknownColumnsError(NewColumnsError):
    """``failOnNewColumns``: files hold columns the stored schema does not have."""

    def __init__(self, *, columns: Sequence[str], files: Sequence[str], schema_location: str) -> None:
        super().__init__(
            f"Columns {list(columns)} in {_some(files)} are not in the stored schema at "
            f"{schema_location}, and schemaEvolutionMode is failOnNewColumns, so ingestion stops "
            "until this is fixed: remove the columns from the file, add them with schema hints, or "
            "switch the evolution mode to addNewColumns or rescue.",
            columns=columns,
            files=files,
        )


class CopyIntoError(IngestionError):
    """COPY INTO cannot load the requested files."""


def _some(files: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(files[:limit])
    more = len(files) - limit
    return shown + (f" and {more} more file(s)" if more > 0 else "") if files else "the landed files"


class LookupCsvError(IngestionError):
    """A lookup's landed CSV files cannot be loaded as they are; the table keeps its last good
    version."""
