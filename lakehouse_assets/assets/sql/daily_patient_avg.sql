-- The seeds' gold cell, as a table: average heart rate per patient and day.
CREATE OR REFRESH STREAMING TABLE gold.daily_patient_avg (
  mrn BIGINT COMMENT 'The medical record number of the patient',
  name STRING COMMENT 'The name of the patient',
  avg_heartrate DOUBLE COMMENT 'The mean of the heart rates recorded that day, in beats per minute',
  date TIMESTAMP COMMENT 'The day (UTC), as a timestamp at midnight'
)
COMMENT 'Average heart rate per patient and day.'
AS SELECT mrn, name, MEAN(heartrate) AS avg_heartrate, DATE_TRUNC('DD', time) AS date
FROM STREAM(silver.recordings_enriched)
GROUP BY mrn, name, DATE_TRUNC('DD', time)
