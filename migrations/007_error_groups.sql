-- 007: an error's headline and group stored beside last_error (skiplock/error_summary.py computes
-- them in the worker; the same fenced statement writes all three). Safe to re-run.
-- The console groups and filters dead letters on error_group, so 100,000 dead jobs with tracebacks
-- cost an index scan, not a regex per row; the headline is what a person reads.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS error_headline text;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS error_group text;

-- Rows written before this migration: the same rules approximated in SQL (a traceback's last
-- line that is not indented, else the first line; digits masked). New rows get the worker's own.
UPDATE jobs
   SET error_headline = h.line,
       error_group = regexp_replace(h.line, '(?<![[:alnum:]_.])[-+]?[0-9]+(\.[0-9]+)?', '<n>', 'g')
  FROM (SELECT id,
               left(CASE WHEN last_error LIKE 'Traceback (most recent call last):%'
                         THEN (SELECT l FROM regexp_split_to_table(last_error, E'\n') WITH ORDINALITY AS t(l, n)
                                WHERE l ~ '^[^[:space:].]' AND l NOT LIKE 'Traceback%' AND l NOT LIKE 'During handling%'
                                  AND l NOT LIKE 'The above exception%'
                                ORDER BY n DESC LIMIT 1)
                         ELSE split_part(last_error, E'\n', 1) END, 300) AS line
          FROM jobs WHERE last_error IS NOT NULL AND error_headline IS NULL) h
 WHERE jobs.id = h.id;

-- Dead letters grouped by (queue, error_group) and filtered on it, newest first within a group.
CREATE INDEX IF NOT EXISTS jobs_dead_group_idx
    ON jobs (status, queue, error_group, finished_at)
    WHERE status IN ('dead', 'failed');
