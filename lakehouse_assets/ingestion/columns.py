"""The metadata columns ingestion adds to every bronze row: what did not fit, where the row
came from, when it was ingested. Contracts, commands and checks name them from here."""

RESCUED_DATA_COLUMN = "_rescued_data"
SOURCE_FILE_COLUMN = "_source_file"
#: Where in its file a row's record is: the line (JSON lines, CSV), the record's position
#: (a multi-line JSON file's array, a Parquet file's rows), 1-based.
SOURCE_LINE_COLUMN = "_source_line"
INGESTED_AT_COLUMN = "_ingested_at"
METADATA_COLUMNS = (RESCUED_DATA_COLUMN, SOURCE_FILE_COLUMN, SOURCE_LINE_COLUMN, INGESTED_AT_COLUMN)
