-- Admissions with a ward and a discharge after their admission; the others are quarantined.
CREATE OR REFRESH STREAMING TABLE silver.admissions_clean (
  admission_id BIGINT COMMENT 'The admission',
  ward STRING COMMENT 'The ward admitted to',
  admitted TIMESTAMP COMMENT 'When the patient was admitted',
  discharged TIMESTAMP COMMENT 'When the patient was discharged',
  length_of_stay_hours DOUBLE COMMENT 'Hours from admission to discharge',
  CONSTRAINT has_ward EXPECT (ward IS NOT NULL) ON VIOLATION DROP ROW,
  CONSTRAINT discharged_after_admitted EXPECT (discharged >= admitted) ON VIOLATION DROP ROW
)
COMMENT 'Admissions with a ward, discharged after they were admitted.'
AS SELECT admission_id, ward, CAST(admitted AS TIMESTAMP) AS admitted, CAST(discharged AS TIMESTAMP) AS discharged,
  (unix_timestamp(CAST(discharged AS TIMESTAMP)) - unix_timestamp(CAST(admitted AS TIMESTAMP))) / 3600.0
    AS length_of_stay_hours
FROM STREAM(bronze.admissions)
