"""Changes to patient records kept as Lakeflow keeps them: AUTO CDC into the current patients
(SCD type 1) and into their history (SCD type 2), by mrn in seq order, op = 'DELETE' deleting."""

from pyspark import pipelines as dp

LANDING = spark.conf.get("lakehouse.landing")  # noqa: F821 (spark is the pipeline's session)
# What a change carries that the patient tables do not keep: the operation, its order, and
# what the ingestion adds (Auto Loader's _rescued_data; the lakehouse's landed file and line).
NOT_KEPT = ["op", "seq", "_rescued_data", "_source_file", "_source_line", "_ingested_at"]


@dp.table(comment="Changes to patient records (mrn, name, op, seq) as landed.")
def patient_changes_bronze():
    return (
        spark.readStream.format("cloudFiles")  # noqa: F821
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaHints", "mrn BIGINT, name STRING, op STRING, seq BIGINT")
        .option("cloudFiles.inferColumnTypes", "true")
        .load(f"{LANDING}/patient_changes")
    )


dp.create_streaming_table("patients_current", comment="One row per live patient (mrn, name).")
dp.create_auto_cdc_flow(
    target="patients_current", source="patient_changes_bronze", keys=["mrn"], sequence_by="seq",
    apply_as_deletes="op = 'DELETE'", except_column_list=NOT_KEPT, stored_as_scd_type=1,
)

dp.create_streaming_table("patients_history", comment="Every version of every patient, opened and closed by seq.")
dp.create_auto_cdc_flow(
    target="patients_history", source="patient_changes_bronze", keys=["mrn"], sequence_by="seq",
    apply_as_deletes="op = 'DELETE'", except_column_list=NOT_KEPT, stored_as_scd_type=2,
)
