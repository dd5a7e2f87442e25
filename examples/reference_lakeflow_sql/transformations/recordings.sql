-- The seeds' heart-rate pipeline in Lakeflow SQL: Auto Loader bronze, the patients lookup,
-- silver with expectations (rows failing one are dropped, into the quarantine here), and the
-- gold tables as materialized views.
--
-- ${lakehouse.landing} is the lakehouse's landing folder, which it adds to every pipeline's
-- configuration; under Lakeflow set it in the pipeline's configuration.

CREATE OR REFRESH STREAMING TABLE recordings_bronze
COMMENT 'Heart-rate recordings as landed, with _rescued_data for whatever did not fit.'
AS SELECT * FROM STREAM read_files(
  '${lakehouse.landing}/recordings',
  format => 'json',
  schemaHints => 'time DOUBLE, heartrate DOUBLE, mrn BIGINT, device_id BIGINT',
  inferColumnTypes => true
);

CREATE OR REFRESH MATERIALIZED VIEW patients (
  mrn BIGINT COMMENT 'The medical record number of the patient',
  name STRING COMMENT 'The name of the patient'
)
COMMENT 'The patients lookup (mrn, name).'
AS SELECT mrn, name FROM read_files(
  '${lakehouse.landing}/patients',
  format => 'csv',
  header => true,
  schema => 'mrn BIGINT, name STRING'
);

CREATE OR REFRESH STREAMING TABLE recordings_enriched (
  CONSTRAINT known_patient EXPECT (name IS NOT NULL) ON VIOLATION DROP ROW,
  CONSTRAINT mrn_positive EXPECT (mrn > 0) ON VIOLATION DROP ROW,
  CONSTRAINT heartrate_positive EXPECT (heartrate > 0) ON VIOLATION DROP ROW,
  CONSTRAINT heartrate_in_range EXPECT (heartrate <= 300) ON VIOLATION DROP ROW,
  CONSTRAINT time_plausible
    EXPECT (time >= TIMESTAMP'2000-01-01' AND time <= current_timestamp() + INTERVAL 1 DAY) ON VIOLATION DROP ROW,
  CONSTRAINT device_id_present EXPECT (device_id IS NOT NULL)
)
COMMENT 'Recordings of known patients with their names, time as a timestamp, heart rates in (0, 300].'
AS SELECT
  a.device_id,
  a.mrn,
  b.name,
  CAST(from_unixtime(a.time, 'yyyy-MM-dd HH:mm:ss') AS TIMESTAMP) AS time,
  a.heartrate
FROM STREAM(LIVE.recordings_bronze) a
LEFT JOIN LIVE.patients b ON a.mrn = b.mrn;

CREATE OR REFRESH MATERIALIZED VIEW daily_patient_avg
COMMENT 'Average heart rate per patient and day.'
AS SELECT mrn, name, date_trunc('DD', time) AS date, avg(heartrate) AS avg_heartrate
FROM recordings_enriched
GROUP BY mrn, name, date_trunc('DD', time);

CREATE OR REFRESH MATERIALIZED VIEW device_counts
COMMENT 'Recordings per device, counted from bronze.'
AS SELECT device_id, count(device_id) AS total_recordings
FROM lakeflow_sql.recordings_bronze
WHERE device_id IS NOT NULL
GROUP BY device_id;
