"""The console's reads of parked jobs (durable jobs' sleeps and waits): the Parked view, the overview's
parked counts and what the job page shows. Reads only: a wake, a signal and a cancel go through the core
(skiplock.core.durable.service, skiplock.signal, skiplock.core.transitions).

Every count reads job_waits, one narrow row per parked job with its queue, never `jobs`: the claim's
table is left alone however many jobs are parked.
"""

from __future__ import annotations

# Parked jobs per queue: how many, how many sleep and wait, the oldest (since when, and which job), and
# the next timer due.
PARKED_BY_QUEUE = """
SELECT queue,
       count(*) AS parked,
       count(*) FILTER (WHERE sleep IS NOT NULL) AS sleeping,
       count(*) FILTER (WHERE key IS NOT NULL) AS waiting,
       min(parked_at) AS oldest_at,
       (array_agg(job_id ORDER BY parked_at, job_id))[1] AS oldest_job,
       min(wake_at) FILTER (WHERE wake_at < '9999-12-31 00:00:00+00') AS next_wake
  FROM job_waits
 GROUP BY queue
 ORDER BY queue
 LIMIT %(limit)s
"""

# Signal keys with parked jobs, the longest-waiting first: how many wait, since when (and which job),
# their first timeout, their queues, and whether a signal of the key was already sent (it then wakes
# them at once: the sweeper repairs one left parked).
PARKED_BY_KEY = """
SELECT w.key,
       count(*) AS waiting,
       min(w.parked_at) AS oldest_at,
       (array_agg(w.job_id ORDER BY w.parked_at, w.job_id))[1] AS oldest_job,
       min(w.wake_at) FILTER (WHERE w.wake_at < '9999-12-31 00:00:00+00') AS first_timeout,
       array_agg(DISTINCT w.queue ORDER BY w.queue) AS queues,
       (SELECT s.sent_at FROM job_signals s WHERE s.key = w.key) AS signalled_at
  FROM job_waits w
 WHERE w.key IS NOT NULL AND (%(key)s::text IS NULL OR w.key = %(key)s::text)
 GROUP BY w.key
 ORDER BY min(w.parked_at), w.key
 LIMIT %(limit)s
"""

# How many keys have waiters (the Parked view says when it shows only the first of them).
KEY_COUNT = "SELECT count(DISTINCT key) FROM job_waits WHERE key IS NOT NULL"

# A key's waiters and its signal, for "send signal"'s confirmation: how many jobs it would wake now, and
# whether a signal was already sent (the first one wins: another changes nothing).
KEY_STATE = """
SELECT (SELECT count(*) FROM job_waits WHERE key = %(key)s) AS waiting,
       (SELECT array_agg(DISTINCT queue) FROM job_waits WHERE key = %(key)s) AS queues,
       s.sent_at, s.payload::text AS payload
  FROM (SELECT 1) one
  LEFT JOIN job_signals s ON s.key = %(key)s
"""

# The database the console writes to, for the confirmations ("on database X").
DATABASE = "SELECT current_database()"
