-- Recordings per device, counted from bronze as in the course: records with no device_id
-- (malformed lines, for example) belong to no device.
CREATE OR REFRESH STREAMING TABLE gold.device_counts (
  device_id BIGINT COMMENT 'The recording device',
  total_recordings BIGINT COMMENT 'How many recordings of the device bronze holds'
)
COMMENT 'Recordings per device, counted from bronze (records with no device_id belong to no device).'
AS SELECT device_id, COUNT(device_id) AS total_recordings
FROM STREAM(bronze.recordings)
WHERE device_id IS NOT NULL
GROUP BY device_id
