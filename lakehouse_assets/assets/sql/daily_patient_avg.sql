-- The seeds' gold cell, as a table: average heart rate per patient and day.
CREATE OR REFRESH STREAMING TABLE gold.daily_patient_avg
COMMENT 'Average heart rate per patient and day.'
AS SELECT mrn, name, MEAN(heartrate) AS avg_heartrate, DATE_TRUNC('DD', time) AS date
FROM STREAM(silver.recordings_enriched)
GROUP BY mrn, name, DATE_TRUNC('DD', time)
