-- Patient record changes kept as history (SCD type 2), Lakeflow's AUTO CDC in SQL: every
-- version of every patient, opened and closed by the `seq` of the changes that made them.
CREATE OR REFRESH STREAMING TABLE silver.patients_history (
  mrn BIGINT COMMENT 'The medical record number of the patient',
  name STRING COMMENT 'The name of the patient in this version',
  __START_AT BIGINT COMMENT 'The seq of the change that opened this version',
  __END_AT BIGINT COMMENT 'The seq of the change that closed this version (null while current)'
)
COMMENT 'Every version of every patient (mrn, name), with __START_AT and __END_AT: the seq of the change that opened the version and of the one that closed it (null while current). Late changes are slotted in by seq; a delete closes the current version.'
TBLPROPERTIES (delta.enableChangeDataFeed = true);

CREATE FLOW patients_history_cdc AS AUTO CDC INTO silver.patients_history
FROM STREAM(bronze.patient_changes)
KEYS (mrn)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op, seq, _rescued_data, _source_file, _source_line, _ingested_at)
STORED AS SCD TYPE 2;
