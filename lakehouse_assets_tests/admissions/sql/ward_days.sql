-- Admissions per ward and day, kept incrementally: each batch's groups merged into the table.
CREATE OR REFRESH STREAMING TABLE gold.ward_days (
  ward STRING COMMENT 'The ward',
  day DATE COMMENT 'The day of admission',
  admissions BIGINT COMMENT 'Admissions that day',
  longest_stay_hours DOUBLE COMMENT 'The longest stay of those admitted that day, in hours'
)
COMMENT 'Admissions per ward and day of admission, with the longest stay.'
AS SELECT ward, CAST(admitted AS DATE) AS day, COUNT(*) AS admissions, MAX(length_of_stay_hours) AS longest_stay_hours
FROM STREAM(silver.admissions_clean)
GROUP BY ward, CAST(admitted AS DATE)
