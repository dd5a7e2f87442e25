"""The metadata columns ingestion adds to every bronze row: what did not fit, where the row
came from, when it was ingested. Contracts, commands and checks name them from here."""

RESCUED_DATA_COLUMN = "_rescued_data"
SOURCE_FILE_COLUMN = "_source_file"
INGESTED_AT_COLUMN = "_ingested_at"
METADATA_COLUMNS = (RESCUED_DATA_COLUMN, SOURCE_FILE_COLUMN, INGESTED_AT_COLUMN)
