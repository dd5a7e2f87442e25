-- Changes to patient records kept as Lakeflow keeps them: AUTO CDC into the current patients
-- (SCD type 1) and into their history (SCD type 2), by mrn in seq order, op = 'DELETE' deleting.
-- What a change carries that the patient tables do not keep: the operation, its order, and what
-- the ingestion adds (Auto Loader's _rescued_data; the lakehouse's landed file and line).

CREATE OR REFRESH STREAMING TABLE patient_changes_bronze
COMMENT 'Changes to patient records (mrn, name, op, seq) as landed.'
AS SELECT * FROM STREAM read_files(
  '${lakehouse.landing}/patient_changes',
  format => 'json',
  schemaHints => 'mrn BIGINT, name STRING, op STRING, seq BIGINT',
  inferColumnTypes => true
);

CREATE OR REFRESH STREAMING TABLE patients_current COMMENT 'One row per live patient (mrn, name).';

CREATE FLOW patients_current_cdc AS AUTO CDC INTO patients_current
FROM STREAM(patient_changes_bronze)
KEYS (mrn)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op, seq, _rescued_data, _source_file, _source_line, _ingested_at)
STORED AS SCD TYPE 1;

CREATE OR REFRESH STREAMING TABLE patients_history COMMENT 'Every version of every patient, opened and closed by seq.';

CREATE FLOW patients_history_cdc AS AUTO CDC INTO patients_history
FROM STREAM(patient_changes_bronze)
KEYS (mrn)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op, seq, _rescued_data, _source_file, _source_line, _ingested_at)
STORED AS SCD TYPE 2;
