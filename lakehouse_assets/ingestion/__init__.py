"""Landing files into bronze tables: Auto Loader-style streams and COPY INTO.

- :class:`AutoLoader` / :func:`autoload_stream`: incremental, exactly-once ingestion of a
  landing folder, with a stored schema, evolution modes and rescued data.
- :func:`copy_into`: an idempotent batch load that remembers the files it loaded in the table.
- :func:`ingested_files` / :func:`copied_files`: what was ingested, file by file.
- :func:`read_lookup_csv`: a small lookup table from CSV files, matched by header name, checked.
"""

from lakehouse_assets.ingestion.autoloader import (
    MAX_SCHEMA_RESTARTS,
    AutoLoader,
    SchemaEvolutionPolicy,
    autoload_stream,
)
from lakehouse_assets.ingestion.columns import (
    INGESTED_AT_COLUMN,
    METADATA_COLUMNS,
    RESCUED_DATA_COLUMN,
    SOURCE_FILE_COLUMN,
)
from lakehouse_assets.ingestion.copy_into import COPY_INTO_APP_ID, CopyIntoResult, IngestedFile, copied_files, copy_into
from lakehouse_assets.ingestion.errors import (
    CopyIntoError,
    IngestionError,
    IngestionOptionsError,
    LandingFolderMissingError,
    LookupCsvError,
    NewColumnsError,
    NothingToInferError,
    SchemaEvolvedError,
    SchemaInferenceError,
    StoredSchemaError,
    UnknownColumnsError,
)
from lakehouse_assets.ingestion.files import data_file_glob, is_data_file
from lakehouse_assets.ingestion.lookup_csv import LookupCsv, read_lookup_csv
from lakehouse_assets.ingestion.options import AutoLoaderOptions, SchemaEvolutionMode, SourceFormat
from lakehouse_assets.ingestion.schema_store import SchemaStore, StoredSchema
from lakehouse_assets.ingestion.state import ingested_files, unread_files

__all__ = [
    "INGESTED_AT_COLUMN",
    "MAX_SCHEMA_RESTARTS",
    "METADATA_COLUMNS",
    "RESCUED_DATA_COLUMN",
    "SOURCE_FILE_COLUMN",
    "COPY_INTO_APP_ID",
    "AutoLoader",
    "AutoLoaderOptions",
    "CopyIntoError",
    "CopyIntoResult",
    "IngestedFile",
    "IngestionError",
    "IngestionOptionsError",
    "LandingFolderMissingError",
    "LookupCsv",
    "LookupCsvError",
    "NewColumnsError",
    "NothingToInferError",
    "SchemaEvolutionMode",
    "SchemaEvolutionPolicy",
    "SchemaEvolvedError",
    "SchemaInferenceError",
    "SchemaStore",
    "SourceFormat",
    "StoredSchema",
    "StoredSchemaError",
    "UnknownColumnsError",
    "autoload_stream",
    "copied_files",
    "copy_into",
    "data_file_glob",
    "ingested_files",
    "is_data_file",
    "read_lookup_csv",
    "unread_files",
]
