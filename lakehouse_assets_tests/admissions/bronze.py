"""Bronze: the ward admissions as landed."""

from lakehouse_assets.assets.bronze import bronze_table
from lakehouse_assets.ingestion import AutoLoaderOptions

admissions = bronze_table(
    name="admissions",
    data_source="admissions",
    source_format="csv",
    # Typed up front: inference over a first file holding a bad value would keep a string.
    options=AutoLoaderOptions(format="csv", header=True,
                              schema_hints="admission_id BIGINT, ward STRING, admitted STRING, discharged STRING"),
    landed_files="Ward admissions as CSV with a header (admission_id, ward, admitted, discharged).",
    description="Ward admissions as landed, with _rescued_data, _source_file and _ingested_at.",
)
