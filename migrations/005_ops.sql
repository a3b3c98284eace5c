-- 005: operations. Worker latency histograms for /metrics, per-table autovacuum settings and
-- fillfactor for a queue table, and the optional monthly-partitioned history table. Safe to re-run.

-- One row per (worker, measurement): Prometheus-style cumulative bucket counts, upserted by
-- each worker's registry heartbeat and summed by /metrics. Rows of workers gone for an hour are
-- folded into one 'exited' row (worker/latency.py), so the summed counters never go backwards.
CREATE TABLE IF NOT EXISTS worker_latency (
    worker_id   text        NOT NULL,
    metric      text        NOT NULL,   -- claim | ack | handler (seconds), claim_batch (jobs)
    bounds      float8[]    NOT NULL,   -- bucket upper bounds, +Inf implied
    counts      bigint[]    NOT NULL,   -- cumulative counts per bound, then +Inf (= total_count)
    total_count bigint      NOT NULL,
    total_sum   float8      NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (worker_id, metric),
    CONSTRAINT worker_latency_shape CHECK (cardinality(counts) = cardinality(bounds) + 1)
);

-- jobs is a queue, not an archive: nearly every row is inserted, updated once or twice
-- (claim, maybe retry) and deleted within seconds. Chosen by measurement (README "Operations",
-- soak runs of tests/benchmarks/soak.py):
--   fillfactor 100             : kept at the default, on purpose. Claim, heartbeat, retry and
--                                ack updates can never be HOT here (status is in every index's
--                                predicate, lease_until is indexed), so free space left on pages
--                                buys nothing: fillfactor 70 made the heap ~30% bigger
--                                (30.9 vs 23.8 MB peak) at the same claim latency;
--   vacuum_scale_factor 0.01   : vacuum once ~1% of rows are dead (plus 1000), not 20%: with
--   + threshold 1000             1M kept rows the default vacuumed 2 times in 3 min (dead rows
--                                up to 213k), these settings 18 times (peak 47k, claim p50
--                                9.0 vs 14.7 ms);
--   vacuum_cost_delay 0        : this table's vacuum is never throttled (it is hot, and small
--                                when healthy), so each autovacuum visit finishes quickly;
--   analyze_scale_factor 0.02  : fresh statistics for the claim plan as the backlog swings.
-- The server's autovacuum_naptime (default 1 min) bounds how often any of this can happen;
-- at high throughput lower it (10s measured: peak heap 6.9 MB instead of 23.8 MB).
ALTER TABLE jobs SET (
    fillfactor = 100,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- Small tables updated in place every few seconds. Unlike jobs, their updates change only columns
-- no index covers (counts, last_seen, histograms), so they can be HOT when the page has room:
-- leave room, and vacuum them often.
ALTER TABLE job_stats SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE workers SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE worker_latency SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05);

-- Kept history in monthly partitions (SKIPLOCK_HISTORY_MODE=partitioned): a succeeded job is
-- moved here by its ack, and an old month is dropped whole instead of mass-DELETEd. jobs itself
-- cannot be partitioned: the producers' ON CONFLICT (unique_key) WHERE ... needs a unique index
-- on unique_key alone, which a partitioned table cannot have.
CREATE TABLE IF NOT EXISTS jobs_history (
    id           bigint      NOT NULL,
    queue        text        NOT NULL,
    priority     int         NOT NULL,
    run_at       timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    started_at   timestamptz,
    finished_at  timestamptz NOT NULL,
    attempts     int         NOT NULL,
    max_attempts int         NOT NULL,
    unique_key   text,
    worker_id    text,                  -- the worker that ran the last attempt
    last_error   text,                  -- errors of earlier attempts, if any
    payload      jsonb       NOT NULL,
    status       job_status  NOT NULL
) PARTITION BY RANGE (finished_at);

CREATE INDEX IF NOT EXISTS jobs_history_id_idx ON jobs_history (id);
CREATE INDEX IF NOT EXISTS jobs_history_queue_idx ON jobs_history (queue, finished_at);

-- Catches rows of a month whose partition does not exist yet, so an ack never fails; the
-- history service moves such rows into their month's partition when it creates it.
CREATE TABLE IF NOT EXISTS jobs_history_default PARTITION OF jobs_history DEFAULT;

-- This month and the next two; the history service keeps creating months ahead.
DO $$
DECLARE
    month date;
BEGIN
    FOR i IN 0..2 LOOP
        month := (date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => i))::date;
        IF to_regclass(format('jobs_history_p%s', to_char(month, 'YYYYMM'))) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF jobs_history FOR VALUES FROM (%L) TO (%L)',
                format('jobs_history_p%s', to_char(month, 'YYYYMM')),
                month::timestamp AT TIME ZONE 'UTC',
                (month + interval '1 month')::timestamp AT TIME ZONE 'UTC');
        END IF;
    END LOOP;
END $$;
